//! The least a durable webhook service does per event, with Herald's HTTP stack
//! (axum, hyper, reqwest, tokio, mimalloc) and nothing else: `POST /api/v1/events`
//! parses the body as JSON, stores the event and one message for it in SQLite
//! (WAL, `synchronous = FULL`, many requests per commit), answers 202 once
//! committed, posts the event to `TARGET`, and records the attempt (the
//! message's new state and an attempt row), many per commit. No routing,
//! signing, circuit, retry or API: whatever Herald does beyond this is its own
//! cost. With `DATABASE` unset nothing is stored at all.
//!
//!   LISTEN=127.0.0.1:8080 TARGET=http://127.0.0.1:8081/hook DATABASE=/tmp/c.db ceiling

use std::sync::mpsc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use tokio::sync::oneshot;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What the writer thread is asked to store.
enum Write {
    /// An event and its message; answered with the message's number once committed.
    Publish { body: Vec<u8>, stored: oneshot::Sender<i64> },
    /// An attempt's end.
    Record { message: i64, status: u16 },
}

#[derive(Clone)]
struct Service {
    client: reqwest::Client,
    target: String,
    writer: Option<mpsc::Sender<Write>>,
}

async fn publish(State(service): State<Service>, body: Bytes) -> StatusCode {
    let Ok(event) = serde_json::from_slice::<serde_json::Value>(&body) else { return StatusCode::BAD_REQUEST };
    let body = serde_json::to_vec(&event).expect("a parsed value serializes");
    let message = match &service.writer {
        Some(writer) => {
            let (stored, committed) = oneshot::channel();
            let _ = writer.send(Write::Publish { body: body.clone(), stored });
            match committed.await {
                Ok(message) => Some(message),
                Err(_) => return StatusCode::SERVICE_UNAVAILABLE,
            }
        }
        None => None,
    };
    tokio::spawn(deliver(service, body, message));
    StatusCode::ACCEPTED
}

async fn deliver(service: Service, body: Vec<u8>, message: Option<i64>) {
    let request = service.client.post(&service.target).header("content-type", "application/json").body(body);
    let status = match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            let _ = response.bytes().await;
            status
        }
        Err(_) => 0,
    };
    if let (Some(writer), Some(message)) = (&service.writer, message) {
        let _ = writer.send(Write::Record { message, status });
    }
}

/// One connection, one thread: whatever waits when a transaction ends forms the next.
fn write(path: String, jobs: mpsc::Receiver<Write>) -> rusqlite::Result<()> {
    let mut db = rusqlite::Connection::open(path)?;
    db.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
         CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, body BLOB NOT NULL, created_at INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, event_id INTEGER NOT NULL, state TEXT NOT NULL,
             attempt_count INTEGER NOT NULL, updated_at INTEGER NOT NULL);
         CREATE INDEX IF NOT EXISTS messages_state ON messages (state, updated_at);
         CREATE TABLE IF NOT EXISTS attempts (message_id INTEGER NOT NULL, number INTEGER NOT NULL,
             status INTEGER NOT NULL, started_at INTEGER NOT NULL, PRIMARY KEY (message_id, number));",
    )?;
    while let Ok(first) = jobs.recv() {
        let batch: Vec<Write> = std::iter::once(first).chain(jobs.try_iter()).collect();
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let txn = db.transaction()?;
        let mut answers = Vec::new();
        for job in batch {
            match job {
                Write::Publish { body, stored } => {
                    txn.prepare_cached("INSERT INTO events (body, created_at) VALUES (?1, ?2)")?
                        .execute((&body, now))?;
                    let event = txn.last_insert_rowid();
                    txn.prepare_cached(
                        "INSERT INTO messages (event_id, state, attempt_count, updated_at) VALUES (?1, 'delivering', 0, ?2)",
                    )?
                    .execute((event, now))?;
                    answers.push((stored, txn.last_insert_rowid()));
                }
                Write::Record { message, status } => {
                    let state = if (200..300).contains(&status) { "delivered" } else { "pending" };
                    txn.prepare_cached(
                        "UPDATE messages SET state = ?2, attempt_count = attempt_count + 1, updated_at = ?3 WHERE id = ?1",
                    )?
                    .execute((message, state, now))?;
                    txn.prepare_cached("INSERT INTO attempts (message_id, number, status, started_at) VALUES (?1, (SELECT attempt_count FROM messages WHERE id = ?1), ?2, ?3)")?
                        .execute((message, status, now))?;
                }
            }
        }
        txn.commit()?;
        for (stored, message) in answers {
            let _ = stored.send(message);
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    let listen = std::env::var("LISTEN").expect("LISTEN: the address to serve");
    let target = std::env::var("TARGET").expect("TARGET: the URL every event is posted to");
    let writer = std::env::var("DATABASE").ok().map(|path| {
        let (writer, jobs) = mpsc::channel();
        std::thread::spawn(move || write(path, jobs).expect("the SQLite file can be written"));
        writer
    });
    let service =
        Service { client: reqwest::Client::builder().tcp_nodelay(true).build().expect("a client"), target, writer };
    let app = axum::Router::new().route("/api/v1/events", post(publish)).with_state(service);
    let listener = tokio::net::TcpListener::bind(listen).await.expect("LISTEN can be bound");
    axum::serve(listener, app).await.expect("serving");
}
