//! The webhook receiver (answers per path, records first arrival per
//! `webhook-id`) and the blackhole (accepts TCP, never answers).

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};

use crate::now_ns;

/// Sharded so concurrent arrivals rarely wait on one lock.
const SHARDS: usize = 32;

/// First arrival (ns since the bench started) per webhook-id, and repeat visits.
pub struct Arrivals {
    shards: Vec<Mutex<HashMap<String, u64>>>,
    hasher: RandomState,
    distinct: AtomicU64,
    repeats: AtomicU64,
    /// Woken at every first arrival.
    arrived: Notify,
}

impl Arrivals {
    fn new() -> Arrivals {
        Arrivals {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
            distinct: AtomicU64::new(0),
            repeats: AtomicU64::new(0),
            arrived: Notify::new(),
        }
    }

    fn record(&self, id: &str, at_ns: u64) {
        let shard = self.hasher.hash_one(id) as usize % SHARDS;
        let mut map = self.shards[shard].lock().unwrap();
        if map.contains_key(id) {
            self.repeats.fetch_add(1, Ordering::Relaxed);
        } else {
            map.insert(id.to_owned(), at_ns);
            self.distinct.fetch_add(1, Ordering::Relaxed);
            self.arrived.notify_waiters();
        }
    }

    /// Distinct ids seen so far.
    pub fn distinct(&self) -> u64 {
        self.distinct.load(Ordering::Relaxed)
    }

    /// Waits until `count` distinct ids have arrived; false when `limit` passed first.
    pub async fn wait_for(&self, count: u64, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            if self.distinct() >= count {
                return true;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                return false;
            }
        }
    }

    /// Arrivals of an id already seen (at-least-once duplicates).
    pub fn repeats(&self) -> u64 {
        self.repeats.load(Ordering::Relaxed)
    }

    /// Empties the tally and hands back every first arrival.
    pub fn take(&self) -> HashMap<String, u64> {
        let mut all = HashMap::with_capacity(self.distinct() as usize);
        for shard in &self.shards {
            all.extend(shard.lock().unwrap().drain());
        }
        self.distinct.store(0, Ordering::Relaxed);
        self.repeats.store(0, Ordering::Relaxed);
        all
    }
}

/// What each path records. `/hook/…`, `/paced/…` and `/raw` answer 200, `/fail/…` 500,
/// `/later/…` 503 with `Retry-After: 86400` (a message scheduled a day later);
/// `/reports` answers 200 and records a `herald.message.dead` event by the
/// message it reports (`data.message_id`), so a second report of one message
/// counts as a repeat.
pub struct Tallies {
    pub ok: Arrivals,
    pub fail: Arrivals,
    pub later: Arrivals,
    pub reports: Arrivals,
    /// `/paced/…`: by path and webhook-id, so that each endpoint's arrivals can be told apart.
    pub paced: Arrivals,
}

pub struct Receiver {
    pub addr: SocketAddr,
    pub tallies: Arc<Tallies>,
    task: JoinHandle<()>,
}

impl Receiver {
    pub async fn start() -> crate::Result<Receiver> {
        let tallies = Arc::new(Tallies {
            ok: Arrivals::new(),
            fail: Arrivals::new(),
            later: Arrivals::new(),
            reports: Arrivals::new(),
            paced: Arrivals::new(),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let app = Router::new().fallback(hit).with_state(tallies.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Receiver { addr, tallies, task })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// The body is read (as a real receiver would) so the connection stays reusable.
async fn hit(State(t): State<Arc<Tallies>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let at = now_ns();
    let id = headers.get("webhook-id").and_then(|v| v.to_str().ok()).unwrap_or("");
    let path = uri.path();
    if path.starts_with("/fail") {
        t.fail.record(id, at);
        StatusCode::INTERNAL_SERVER_ERROR.into_response()
    } else if path.starts_with("/reports") {
        let event: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        t.reports.record(event["data"]["message_id"].as_str().unwrap_or(""), at);
        StatusCode::OK.into_response()
    } else if path.starts_with("/paced") {
        t.paced.record(&format!("{path} {id}"), at);
        StatusCode::OK.into_response()
    } else if path.starts_with("/later") {
        t.later.record(id, at);
        (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", "86400")]).into_response()
    } else {
        t.ok.record(id, at);
        StatusCode::OK.into_response()
    }
}

/// Accepts TCP connections and keeps them open without ever answering.
pub struct Blackhole {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Blackhole {
    pub async fn start() -> crate::Result<Blackhole> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            // Owned here, so dropping the blackhole closes every connection.
            let mut held = JoinSet::new();
            while let Ok((socket, _)) = listener.accept().await {
                while held.try_join_next().is_some() {}
                held.spawn(swallow(socket));
            }
        });
        Ok(Blackhole { addr, task })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// Reads and discards what the client sends, never answering, until it gives
/// up and closes: its sockets are released instead of piling up.
async fn swallow(mut socket: TcpStream) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = socket.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
}

impl Drop for Blackhole {
    fn drop(&mut self) {
        self.task.abort();
    }
}
