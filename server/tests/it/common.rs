//! Test harness: a fresh database per test (SQLite file, or a new PostgreSQL
//! database when TEST_DATABASE_URL is set), the real application on port 0,
//! and a receiver that records what Herald sends.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use herald::clock::{Clock, ManualClock};
use herald::pipeline::Lanes;
use herald::store::messages::Lane;
use herald::{Application, Settings};
use sea_orm::{ConnectionTrait, Database};
use serde_json::{Value, json};
use tokio::sync::watch;

pub const ADMIN_TOKEN: &str = "test-admin-token-0123456789abcdefghijklmnop";

/// A database that exists for one test.
pub struct TestDb {
    pub url: String,
    cleanup: Option<(String, String)>,
}

impl TestDb {
    pub async fn new() -> TestDb {
        let name = format!("herald_t_{}", ulid::Ulid::new().to_string().to_lowercase());
        match std::env::var("TEST_DATABASE_URL") {
            Ok(base) if base.starts_with("postgres") => {
                let admin = Database::connect(&base).await.expect("TEST_DATABASE_URL answers");
                admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await.expect("create test database");
                admin.close().await.ok();
                let mut url = url::Url::parse(&base).expect("TEST_DATABASE_URL is a URL");
                url.set_path(&format!("/{name}"));
                TestDb { url: url.to_string(), cleanup: Some((base, name)) }
            }
            _ => {
                let path = std::env::temp_dir().join(format!("{name}.db"));
                TestDb { url: format!("sqlite://{}?mode=rwc", path.display()), cleanup: None }
            }
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((base, name)) = self.cleanup.take() {
            // Best effort, on a thread of its own: Drop cannot await.
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                rt.block_on(async {
                    if let Ok(db) = Database::connect(&base).await {
                        let _ = db.execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
                    }
                });
            })
            .join();
        } else if let Some(path) = self.url.strip_prefix("sqlite://").and_then(|u| u.split('?').next()) {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{path}{suffix}"));
            }
        }
    }
}

pub fn settings(db: &TestDb) -> Settings {
    settings_for(&db.url)
}

/// The tests' settings over the database at `url`.
pub fn settings_for(url: &str) -> Settings {
    Settings {
        listen: "127.0.0.1:0".into(),
        database_url: url.to_string(),
        admin_token: Some(ADMIN_TOKEN.into()),
        admin_password: Some("admin-password".into()),
        allow_private_targets: true,
        // A fixed key: the tests' databases live in shared directories, where a generated key file would be shared too.
        secret_key: Some(TEST_SECRET_KEY.into()),
        ..Settings::default()
    }
}

/// A request to the app under test that takes this long has hung: the test fails instead of waiting forever.
pub const HTTP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Base64 of 32 bytes, the key sealing subscription secrets in tests.
pub const TEST_SECRET_KEY: &str = "dGVzdC1rZXktb2YtaGVyYWxkLXRlc3RzLTMyLWJ5dGU=";

/// The application served on port 0. Its workers do not run: tests drive them
/// with `deliver_fresh` / `deliver_retries` and move the manual clock.
pub struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    pub clock: Arc<ManualClock>,
    pub lanes: Lanes,
    pub services: herald::service::Services,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    _stop: watch::Sender<bool>,
    _db: TestDb,
}

impl TestApp {
    pub async fn start() -> TestApp {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(adjust: impl FnOnce(&mut Settings)) -> TestApp {
        herald::tls::install_provider();
        let db = TestDb::new().await;
        let mut s = settings(&db);
        adjust(&mut s);
        let clock = ManualClock::starting_at(chrono::Utc::now().timestamp_millis());
        let app = Application::build_with_clock(s, clock.clone()).await.expect("application starts");
        let base = format!("http://{}", app.addr);
        let services = app.services.clone();
        let (stop, stopped) = watch::channel(false);
        let server = tokio::spawn(app.run(stopped, false));
        TestApp {
            base,
            http: reqwest::Client::builder().timeout(HTTP_TIMEOUT).build().unwrap(),
            clock,
            lanes: Lanes::new(services.pipeline.clone()),
            services,
            server,
            _stop: stop,
            _db: db,
        }
    }

    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Ends the application as a crash would: its task is dropped where it stands, nothing is
    /// shut down or released in order (its open files close, as a dead process's do).
    pub async fn crash(self) {
        self.server.abort();
        let _ = self.server.await;
    }

    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("request reaches the server");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    pub async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, Some(token), None).await
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        self.call(reqwest::Method::POST, path, Some(token), Some(body)).await
    }

    /// A customer with an API key; returns (customer id, token).
    pub async fn customer(&self, name: &str) -> (String, String) {
        let (status, c) = self.post("/api/v1/customers", ADMIN_TOKEN, json!({"name": name})).await;
        assert_eq!(status, 201, "{c}");
        let id = c["id"].as_str().unwrap().to_string();
        let (status, k) =
            self.post(&format!("/api/v1/customers/{id}/api-keys"), ADMIN_TOKEN, json!({"name": "k"})).await;
        assert_eq!(status, 201, "{k}");
        (id, k["token"].as_str().unwrap().to_string())
    }

    pub async fn subscribe(&self, token: &str, body: Value) -> Value {
        let (status, sub) = self.post("/api/v1/subscriptions", token, body).await;
        assert_eq!(status, 201, "{sub}");
        sub
    }

    pub async fn publish(&self, token: &str, id: &str, event_type: &str) -> Value {
        let event = json!({"specversion": "1.0", "id": id, "source": "/test", "type": event_type, "data": {"n": id}});
        let (status, body) = self.post("/api/v1/events", token, event).await;
        assert_eq!(status, 202, "{body}");
        body["events"][0].clone()
    }

    /// Publishes `count` events in one CloudEvents batch; returns the HTTP status.
    pub async fn publish_batch(&self, token: &str, count: usize) -> u16 {
        self.publish_numbered(token, 0..count).await
    }

    /// Publishes the events numbered `numbers` (ids `e<n>`, type `t`) in one batch; returns the HTTP status.
    pub async fn publish_numbered(&self, token: &str, numbers: std::ops::Range<usize>) -> u16 {
        let batch: Vec<Value> = numbers
            .map(|i| json!({"specversion": "1.0", "id": format!("e{i}"), "source": "/b", "type": "t"}))
            .collect();
        let resp = self
            .http
            .post(format!("{}/api/v1/events", self.base))
            .bearer_auth(token)
            .header("content-type", "application/cloudevents-batch+json")
            .body(Value::Array(batch).to_string())
            .send()
            .await
            .expect("request reaches the server");
        resp.status().as_u16()
    }

    pub async fn message(&self, token: &str, id: &str) -> Value {
        let (status, m) = self.get(&format!("/api/v1/messages/{id}"), token).await;
        assert_eq!(status, 200, "{m}");
        m
    }

    pub async fn deliver_fresh(&self) -> usize {
        self.lanes.tick(Lane::Fresh).await.expect("fresh lane runs")
    }

    pub async fn deliver_retries(&self) -> usize {
        self.lanes.tick(Lane::Retry).await.expect("retry lane runs")
    }

    /// Moves the clock up to the real time. Ids carry the real time of their making, and the
    /// sweeper finds old rows by their ids as well as by the clock: a test that ages rows by the
    /// clock makes them after this, so that the setup's real seconds do not count against it.
    pub fn catch_up_with_real_time(&self) {
        let lag = chrono::Utc::now().timestamp_millis() - self.now_ms();
        if lag > 0 {
            self.clock.advance_ms(lag);
        }
    }

    pub fn advance_secs(&self, secs: f64) {
        self.clock.advance_ms((secs * 1000.0) as i64);
    }
}

/// One request as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Seen {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }
}

/// A status and extra headers the receiver answers with.
type Answer = (u16, Vec<(String, String)>);

#[derive(Default)]
struct ReceiverState {
    seen: Mutex<Vec<Seen>>,
    /// Answers to give, in order; 200 when empty.
    script: Mutex<VecDeque<Answer>>,
}

/// An HTTP receiver on 127.0.0.1:0 that records every request.
#[derive(Clone)]
pub struct TestReceiver {
    pub url: String,
    state: Arc<ReceiverState>,
}

impl TestReceiver {
    pub async fn start() -> TestReceiver {
        let state = Arc::new(ReceiverState::default());
        let app = axum::Router::new().fallback(record).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        TestReceiver { url, state }
    }

    pub fn answer(&self, status: u16) {
        self.answer_with(status, &[]);
    }

    pub fn answer_with(&self, status: u16, headers: &[(&str, &str)]) {
        let headers = headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.state.script.lock().unwrap().push_back((status, headers));
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }
}

async fn record(
    State(state): State<Arc<ReceiverState>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    state.seen.lock().unwrap().push(Seen { path: uri.path().to_string(), headers, body });
    let (status, extra) = state.script.lock().unwrap().pop_front().unwrap_or((200, Vec::new()));
    let mut response = (StatusCode::from_u16(status).unwrap(), "ok").into_response();
    for (k, v) in extra {
        response.headers_mut().insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            axum::http::HeaderValue::from_str(&v).unwrap(),
        );
    }
    response
}
