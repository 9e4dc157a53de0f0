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
