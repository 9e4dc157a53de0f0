//! While the database refuses Herald's writes (a read-only file or server, as
//! a full disk or a failover leaves it), every answer is quick and honest: 503
//! problem+json with `Retry-After`, `/healthz` 503 naming the database, the
//! dashboard's error page. When the database takes writes again, publishing
//! and delivery resume on their own, and nothing accepted is lost.
//!
//! On SQLite the one pooled connection is made read-only (`query_only`); on
//! PostgreSQL the test's database is made read-only and Herald's connections
//! to it are ended, as a server restart or a failover would end them.

use crate::common;

use std::time::Duration;

use common::{TestApp, TestReceiver};
use sea_orm::{ConnectionTrait, Database};
use serde_json::{Value, json};

async fn refuse_writes(app: &TestApp, refuse: bool) {
    let url = &app.services.settings.database_url;
    if !url.starts_with("postgres") {
        let pragma = format!("PRAGMA query_only = {}", if refuse { "ON" } else { "OFF" });
        app.services.db.execute_unprepared(&pragma).await.expect("the pragma runs");
        return;
    }
    let name = url::Url::parse(url).unwrap().path().trim_start_matches('/').to_string();
    let admin = Database::connect(std::env::var("TEST_DATABASE_URL").unwrap()).await.expect("the server answers");
    let setting = if refuse { "SET default_transaction_read_only = on" } else { "RESET default_transaction_read_only" };
    admin.execute_unprepared(&format!("ALTER DATABASE {name} {setting}")).await.expect("ALTER DATABASE");
    admin
        .execute_unprepared(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' AND pid <> pg_backend_pid()"
        ))
        .await
        .expect("ending Herald's connections");
    admin.close().await.ok();
}

/// Publishes one event; returns the status, the body and the Retry-After header.
async fn publish(app: &TestApp, key: &str, id: &str) -> (u16, Value, Option<String>, String) {
    let event = json!({"specversion": "1.0", "id": id, "source": "/test", "type": "order.created"});
    let resp = app.http.post(format!("{}/api/v1/events", app.base)).bearer_auth(key).json(&event).send().await.unwrap();
    let status = resp.status().as_u16();
    let header = |name: &str| resp.headers().get(name).map(|v| v.to_str().unwrap().to_string());
    let retry_after = header("retry-after");
    let content_type = header("content-type").unwrap_or_default();
    (status, resp.json().await.unwrap_or(Value::Null), retry_after, content_type)
}

#[tokio::test]
async fn while_the_database_refuses_writes_answers_are_503_and_work_resumes_when_it_takes_them_again() {
    let rx = TestReceiver::start().await;
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "s", "url": format!("{}/hook", rx.url), "event_types": ["*"]})).await;
    app.publish(&key, "before", "order.created").await;
    let health = app.services.pipeline.health.clone();

    refuse_writes(&app, true).await;
    let (status, problem, retry_after, content_type) = publish(&app, &key, "during").await;
    assert_eq!(status, 503, "{problem}");
    assert_eq!(content_type, "application/problem+json");
    assert_eq!(retry_after.as_deref(), Some("2"));
    assert!(problem["detail"].as_str().unwrap().contains("unavailable"), "{problem}");
    assert!(health.is_down(), "the failed publish started an outage");
    // Refused at once now, without a statement: the same answer.
    let (status, _, retry_after, _) = publish(&app, &key, "during-2").await;
    assert_eq!((status, retry_after.as_deref()), (503, Some("2")));

    let (status, body) = app.call(reqwest::Method::GET, "/healthz", None, None).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "database unavailable");
    let database = body["database"].as_str().unwrap();
    assert!(database.starts_with("PostgreSQL at ") || database.starts_with("SQLite "), "{database}");
    assert!(!body["error"].as_str().unwrap().is_empty());

    let page = app.http.get(format!("{}/", app.base)).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 503);
    assert!(page.text().await.unwrap().contains("The database is unavailable"));

    // A read needs no write, but an API key's lookup may fail too: either way no 500.
    let (status, body) = app.get("/api/v1/subscriptions", &key).await;
    assert!(status == 200 || status == 503, "{status} {body}");

    refuse_writes(&app, false).await;
    tokio::time::timeout(Duration::from_secs(10), health.back()).await.expect("the probe finds the database back");
    let (status, body) = app.call(reqwest::Method::GET, "/healthz", None, None).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("ok")), "{body}");
    app.publish(&key, "after", "order.created").await;
    // Nothing refused was stored: publishing it again is no duplicate.
    let again = app.publish(&key, "during", "order.created").await;
    assert_eq!(again["duplicate"], false, "{again}");
    assert_eq!(app.deliver_fresh().await, 3);
    let mut delivered: Vec<String> = rx
        .seen()
        .iter()
        .map(|seen| match seen.header("ce-id") {
            "" => serde_json::from_slice::<Value>(&seen.body).unwrap()["id"].as_str().unwrap().to_string(),
            binary => binary.to_string(),
        })
        .collect();
    delivered.sort();
    assert_eq!(delivered, ["after", "before", "during"]);
}

/// Tries to open the database at `url` in the background, as Herald does at start, and waits
/// until a first try has failed because the database does not answer yet; returns that error and
/// the opening, still waiting.
async fn connecting_before_it_answers(
    url: String,
) -> (String, tokio::task::JoinHandle<Result<sea_orm::DatabaseConnection, sea_orm::DbErr>>) {
    use herald::config::SqliteSynchronous;
    let (tried, mut failures) = tokio::sync::mpsc::unbounded_channel();
    let opening = tokio::spawn(async move {
        let patience = Duration::from_secs(30);
        herald::store::connect_patiently(&url, SqliteSynchronous::Full, patience, move |e| {
            let _ = tried.send(e.to_string());
        })
        .await
    });
    let first = tokio::time::timeout(Duration::from_secs(20), failures.recv()).await;
    (first.expect("a first try failed").expect("the opening goes on"), opening)
}

#[tokio::test]
async fn at_start_a_postgresql_server_that_refuses_connections_is_waited_for() {
    let Ok(base) = std::env::var("TEST_DATABASE_URL") else {
        eprintln!("skipped: a PostgreSQL server; set TEST_DATABASE_URL to run it");
        return;
    };
    // A port nothing listens on, until the test forwards it to the real server.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut url = url::Url::parse(&base).unwrap();
    let server = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(5432));
    url.set_host(Some("127.0.0.1")).unwrap();
    url.set_port(Some(port)).unwrap();
    let (first, opening) = connecting_before_it_answers(url.to_string()).await;
    // sqlx tries a refused connection again until the pool's deadline, then says it timed out.
    assert!(first.contains("refused") || first.contains("timed out"), "{first}");

    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let server = server.clone();
            tokio::spawn(async move {
                let mut upstream = tokio::net::TcpStream::connect(server).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            });
        }
    });
    let db = opening.await.unwrap().expect("the server answered within the patience");
    db.execute_unprepared("SELECT 1").await.expect("the connection works");
}

#[tokio::test]
async fn at_start_a_sqlite_file_locked_for_longer_than_a_request_waits_is_waited_for() {
    use sea_orm::sqlx::{ConnectOptions, Connection, Executor};
    let dir = std::env::temp_dir().join(format!("herald-start-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("locked.db");
    let url = format!("sqlite://{}?mode=rwc", file.display());
    // Another process's exclusive lock: Herald's first connection cannot switch the file to WAL
    // within a request's deadline for a connection.
    let mut holder = url.parse::<sea_orm::sqlx::sqlite::SqliteConnectOptions>().unwrap().connect().await.unwrap();
    holder.execute("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; CREATE TABLE held (x)").await.unwrap();
    let (first, opening) = connecting_before_it_answers(url).await;
    assert!(first.contains("timed out"), "{first}");

    holder.execute("ROLLBACK").await.unwrap();
    holder.close().await.unwrap();
    let db = opening.await.unwrap().expect("the file was free within the patience");
    db.execute_unprepared("CREATE TABLE t (x)").await.expect("the connection writes");
    std::fs::remove_dir_all(&dir).unwrap();
}
