//! The least a durable webhook service does per event, with Herald's HTTP stack
//! (axum, hyper, reqwest, tokio, mimalloc) and nothing else: `POST /api/v1/events`
//! parses the body as JSON, stores the event and one message for it in SQLite
//! (WAL, `synchronous = FULL`, many requests per commit), answers 202 once
//! committed, posts the event to `TARGET`, and records the attempt (the
//! message's new state and an attempt row), many per commit. No routing,
//! signing, circuit, retry or API: whatever Herald does beyond this is its own
//! cost. With `DATABASE` unset nothing is stored at all; with a `postgres://`
//! URL the same rows go to PostgreSQL (commits flushed, `synchronous_commit`
//! on) over four connections, each batch's rows in one statement per table.
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

/// Whatever waits on the channel when a transaction ends: the next batch.
fn next_batch(jobs: &mpsc::Receiver<Write>) -> Option<Vec<Write>> {
    let first = jobs.recv().ok()?;
    Some(std::iter::once(first).chain(jobs.try_iter()).collect())
}

/// PostgreSQL's writers: while one waits for its commit, the next takes what has queued.
const POSTGRES_WRITERS: usize = 4;

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
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
    while let Some(batch) = next_batch(&jobs) {
        let now = now_ms();
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

/// SQLite's tables, in PostgreSQL.
fn create_postgres_tables(url: &str) -> Result<(), postgres::Error> {
    let mut db = postgres::Client::connect(url, postgres::NoTls)?;
    db.batch_execute(
        "CREATE TABLE IF NOT EXISTS events (id BIGSERIAL PRIMARY KEY, body BYTEA NOT NULL, created_at BIGINT NOT NULL);
         CREATE TABLE IF NOT EXISTS messages (id BIGSERIAL PRIMARY KEY, event_id BIGINT NOT NULL, state TEXT NOT NULL,
             attempt_count INTEGER NOT NULL, updated_at BIGINT NOT NULL);
         CREATE INDEX IF NOT EXISTS messages_state ON messages (state, updated_at);
         CREATE TABLE IF NOT EXISTS attempts (message_id BIGINT NOT NULL, number INTEGER NOT NULL,
             status INTEGER NOT NULL, started_at BIGINT NOT NULL, PRIMARY KEY (message_id, number));",
    )?;
    Ok(())
}

/// The same rows in PostgreSQL, a connection per thread: a batch's events and
/// messages in one statement, its attempts' ends in another, one commit.
fn write_postgres(url: &str, jobs: &std::sync::Mutex<mpsc::Receiver<Write>>) -> Result<(), postgres::Error> {
    let mut db = postgres::Client::connect(url, postgres::NoTls)?;
    // Found by key, as Herald's recorder plans it: without these the planner
    // may pick a hash join over the whole table for a batch's updates.
    db.batch_execute(
        "SET plan_cache_mode = force_generic_plan; SET enable_hashjoin = off;
         SET enable_mergejoin = off; SET enable_seqscan = off",
    )?;
    let publish = db.prepare(
        "WITH e AS (INSERT INTO events (body, created_at) SELECT unnest($1::bytea[]), $2 RETURNING id)
         INSERT INTO messages (event_id, state, attempt_count, updated_at) SELECT id, 'delivering', 0, $2 FROM e
         RETURNING id",
    )?;
    let record = db.prepare(
        "WITH m AS (UPDATE messages SET state = r.state, attempt_count = attempt_count + 1, updated_at = $3
                    FROM unnest($1::bigint[], $2::text[], $4::int[]) AS r(id, state, status)
                    WHERE messages.id = r.id RETURNING messages.id, attempt_count, r.status)
         INSERT INTO attempts (message_id, number, status, started_at) SELECT id, attempt_count, status, $3 FROM m",
    )?;
    loop {
        let Some(batch) = next_batch(&jobs.lock().expect("no writer panics while taking a batch")) else {
            return Ok(());
        };
        let now = now_ms();
        let (mut bodies, mut waiting) = (Vec::new(), Vec::new());
        let (mut messages, mut states, mut statuses) = (Vec::new(), Vec::new(), Vec::new());
        for job in batch {
            match job {
                Write::Publish { body, stored } => {
                    bodies.push(body);
                    waiting.push(stored);
                }
                Write::Record { message, status } => {
                    messages.push(message);
                    states.push(if (200..300).contains(&status) { "delivered" } else { "pending" });
                    statuses.push(i32::from(status));
                }
            }
        }
        let mut txn = db.transaction()?;
        let stored = if bodies.is_empty() { Vec::new() } else { txn.query(&publish, &[&bodies, &now])? };
        if !messages.is_empty() {
            txn.execute(&record, &[&messages, &states, &now, &statuses])?;
        }
        txn.commit()?;
        for (stored, row) in waiting.into_iter().zip(stored) {
            let _ = stored.send(row.get(0));
        }
    }
}

#[tokio::main]
async fn main() {
    let listen = std::env::var("LISTEN").expect("LISTEN: the address to serve");
    let target = std::env::var("TARGET").expect("TARGET: the URL every event is posted to");
    let writer = std::env::var("DATABASE").ok().map(|path| {
        let (writer, jobs) = mpsc::channel();
        if path.starts_with("postgres://") {
            // On a thread of its own: the blocking client runs a runtime of its own.
            let url = path.clone();
            let created = std::thread::spawn(move || create_postgres_tables(&url)).join();
            created.expect("creating the tables panicked").expect("the PostgreSQL database takes the tables");
            let jobs = std::sync::Arc::new(std::sync::Mutex::new(jobs));
            for _ in 0..POSTGRES_WRITERS {
                let (path, jobs) = (path.clone(), jobs.clone());
                std::thread::spawn(move || write_postgres(&path, &jobs).expect("the PostgreSQL database can be written"));
            }
        } else {
            std::thread::spawn(move || write(path, jobs).expect("the SQLite file can be written"));
        }
        writer
    });
    let service =
        Service { client: reqwest::Client::builder().tcp_nodelay(true).build().expect("a client"), target, writer };
    let app = axum::Router::new().route("/api/v1/events", post(publish)).with_state(service);
    let listener = tokio::net::TcpListener::bind(listen).await.expect("LISTEN can be bound");
    axum::serve(listener, app).await.expect("serving");
}
