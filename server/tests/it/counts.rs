//! The counts kept beside the rows (`store::counts`): after each way messages
//! and attempts come and go (publish, operational events, replay, retention),
//! every count equals a count of the table itself.

use std::collections::BTreeMap;

use herald::pipeline::retention::sweep;
use herald::store::counts;
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use serde_json::json;

use crate::common::{TestApp, TestReceiver};

/// Messages per customer, and attempts per (customer, minute): (succeeded, failed), as the tables hold them.
async fn tables(db: &DatabaseConnection) -> (BTreeMap<String, u64>, BTreeMap<(String, i64), (u64, u64)>) {
    let backend = db.get_database_backend();
    let sql = "SELECT customer_id, count(*) AS n FROM messages GROUP BY customer_id";
    let mut messages = BTreeMap::new();
    for row in db.query_all_raw(Statement::from_string(backend, sql)).await.unwrap() {
        messages.insert(row.try_get("", "customer_id").unwrap(), row.try_get::<i64>("", "n").unwrap() as u64);
    }
    let sql = "SELECT customer_id, started_at, outcome FROM attempts";
    let mut attempts: BTreeMap<(String, i64), (u64, u64)> = BTreeMap::new();
    for row in db.query_all_raw(Statement::from_string(backend, sql)).await.unwrap() {
        let started_at: i64 = row.try_get("", "started_at").unwrap();
        let minute = attempts.entry((row.try_get("", "customer_id").unwrap(), started_at / 60_000)).or_default();
        if row.try_get::<String>("", "outcome").unwrap() == "success" {
            minute.0 += 1;
        } else {
            minute.1 += 1;
        }
    }
    (messages, attempts)
}

/// Asserts the counts kept equal the tables' (the attempts' too unless retention removed some: their
/// minutes keep counting what was attempted); returns the messages kept of each customer.
async fn assert_counts_match(app: &TestApp, customers: &[&str], step: &str, with_attempts: bool) -> Vec<u64> {
    let db = &app.services.db;
    let (messages, attempts) = tables(db).await;
    let mut kept = Vec::new();
    for customer in customers {
        let n = counts::messages_kept(db, Some(&(*customer).into())).await.unwrap();
        assert_eq!(n, messages.get(*customer).copied().unwrap_or(0), "{step}: {customer}'s messages");
        kept.push(n);
        if !with_attempts {
            continue;
        }
        let minutes = counts::attempts_per_minute(db, Some(&(*customer).into()), 0).await.unwrap();
        let expected: Vec<(i64, u64, u64)> =
            attempts.iter().filter(|((c, _), _)| c == customer).map(|((_, m), (s, f))| (*m, *s, *f)).collect();
        assert_eq!(sorted(minutes), expected, "{step}: {customer}'s attempts per minute");
    }
    let all = counts::messages_kept(db, None).await.unwrap();
    assert_eq!(all, messages.values().sum::<u64>(), "{step}: every message");
    if !with_attempts {
        return kept;
    }
    let mut every: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
    for ((_, minute), (s, f)) in &attempts {
        let sum = every.entry(*minute).or_default();
        (sum.0, sum.1) = (sum.0 + s, sum.1 + f);
    }
    let expected: Vec<(i64, u64, u64)> = every.into_iter().map(|(m, (s, f))| (m, s, f)).collect();
    assert_eq!(sorted(counts::attempts_per_minute(db, None, 0).await.unwrap()), expected, "{step}: every attempt");
    kept
}

fn sorted(mut rows: Vec<(i64, u64, u64)>) -> Vec<(i64, u64, u64)> {
    rows.sort();
    rows
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).unwrap().to_rfc3339()
}

#[tokio::test]
async fn the_counts_kept_equal_the_tables_after_every_change() {
    let app = TestApp::start_with(|s| {
        s.retention.messages_secs = 3600;
        s.retention.events_secs = 7200;
    })
    .await;
    let (ok, refusing) = (TestReceiver::start().await, TestReceiver::start().await);
    refusing.answer(400);
    let (acme, key) = app.customer("acme").await;
    let (globex, other_key) = app.customer("globex").await;
    let customers = [acme.as_str(), globex.as_str()];
    assert_eq!(assert_counts_match(&app, &customers, "at first", true).await, [0, 0]);

    // Every event to two subscriptions; one's receiver refuses, and each death is reported.
    app.subscribe(&key, json!({"name": "ok", "url": ok.url, "event_types": ["t"]})).await;
    let once = json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 1});
    app.subscribe(&key, json!({"name": "no", "url": refusing.url, "event_types": ["t"], "retry_policy": once})).await;
    app.subscribe(&key, json!({"name": "ops", "url": ok.url, "event_types": ["herald.message.dead"]})).await;
    app.subscribe(&other_key, json!({"name": "ok", "url": ok.url, "event_types": ["*"]})).await;
    app.catch_up_with_real_time();
    let t0 = app.now_ms();
    assert_eq!(app.publish_batch(&key, 5).await, 202);
    assert_eq!(app.publish_batch(&other_key, 3).await, 202);
    assert_eq!(assert_counts_match(&app, &customers, "published", true).await, [10, 3]);

    app.deliver_fresh().await;
    app.advance_secs(61.0);
    app.deliver_fresh().await;
    let kept = assert_counts_match(&app, &customers, "delivered, dead and reported", true).await;
    assert!(kept[0] > 10 && kept[1] == 3, "deaths reported, as messages of their own: {kept:?}");

    // A replay of the archive makes new messages; a replay of a dead letter reopens it.
    let late = app.subscribe(&other_key, json!({"name": "late", "url": ok.url, "event_types": ["t"]})).await;
    let window = json!({"since": rfc3339(t0 - 1000), "until": rfc3339(t0 + 1000), "subscription_id": late["id"]});
    let (status, replayed) = app.post("/api/v1/events/replay", &other_key, window).await;
    assert_eq!((status, &replayed["replayed"]), (202, &json!(3)), "{replayed}");
    let (status, bulk) = app.post("/api/v1/messages/replay", &key, json!({"state": "dead"})).await;
    assert!(status == 202 && bulk["replayed"].as_u64() > Some(0), "{bulk}");
    app.deliver_fresh().await;
    app.advance_secs(61.0);
    app.deliver_fresh().await;
    assert_eq!(assert_counts_match(&app, &customers, "replayed", true).await[1], 6);

    // Retention takes the ended messages from the counts; a day on, every minute is forgotten.
    app.advance_secs(3600.0);
    let swept = sweep(&app.services.pipeline).await.unwrap();
    assert!(swept.messages > 0, "{swept:?}");
    assert_counts_match(&app, &customers, "swept", false).await;
    app.advance_secs(86_400.0);
    sweep(&app.services.pipeline).await.unwrap();
    assert_counts_match(&app, &customers, "a day on", false).await;
    assert_eq!(counts::attempts_per_minute(&app.services.db, None, 0).await.unwrap(), vec![]);
}
