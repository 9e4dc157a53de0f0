//! Replays as durable jobs: a replay of more than one batch goes on in the runner and replays each
//! event or dead message exactly once, even when another process takes the job over; a cancelled
//! job replays nothing more; a job is its customer's alone.

use herald::pipeline::replays::{self, Step};
use herald::store::replays as jobs;
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement, TransactionTrait};
use serde_json::{Value, json};

use crate::common::{ADMIN_TOKEN, TestApp, TestReceiver};

const EVENTS: usize = 1200;

/// `count` events of type `t`, in batches of at most 1000.
async fn publish_many(app: &TestApp, token: &str, count: usize) {
    for start in (0..count).step_by(1000) {
        assert_eq!(app.publish_numbered(token, start..count.min(start + 1000)).await, 202);
    }
}

/// How many messages the subscription has, and for how many distinct events.
async fn messages_of(db: &DatabaseConnection, subscription_id: &str) -> (i64, i64) {
    let sql = format!(
        "SELECT count(*) AS n, count(DISTINCT event_id) AS events FROM messages WHERE subscription_id = '{subscription_id}'"
    );
    let row = db.query_one_raw(Statement::from_string(db.get_database_backend(), sql)).await.unwrap().unwrap();
    (row.try_get("", "n").unwrap(), row.try_get("", "events").unwrap())
}

/// A customer subscribed to `t` with `EVENTS` events published: (token, subscription id, window).
async fn archive(app: &TestApp, receiver: &TestReceiver) -> (String, String, Value) {
    let (_, token) = app.customer("acme").await;
    let sub = app.subscribe(&token, json!({"name": "s", "url": receiver.url, "event_types": ["t"]})).await;
    let sub_id = sub["id"].as_str().unwrap().to_string();
    publish_many(app, &token, EVENTS).await;
    // A window ends when its job starts, by the clock, and events are found by their ids, which
    // carry the real time: on a slow machine the publish takes longer than the slack between them.
    app.catch_up_with_real_time();
    let hour = chrono::Duration::hours(1);
    let now = herald::clock::to_utc(app.now_ms());
    let window =
        json!({"subscription_id": sub_id, "since": (now - hour).to_rfc3339(), "until": (now + hour).to_rfc3339()});
    (token, sub_id, window)
}

async fn run_to_the_end(app: &TestApp) {
    for _ in 0..100 {
        if !replays::work_one_batch(&app.services.pipeline).await.unwrap() {
            return;
        }
    }
    panic!("the runner never ran out of work");
}

#[tokio::test]
async fn a_long_window_goes_on_in_the_runner_and_replays_each_event_once() {
    let app = TestApp::start().await;
    let receiver = TestReceiver::start().await;
    let (token, sub_id, window) = archive(&app, &receiver).await;
    let (status, started) = app.post("/api/v1/events/replay", &token, window).await;
    assert_eq!(status, 202, "{started}");
    assert_eq!((started["state"].as_str(), started["replayed"].as_u64()), (Some("running"), Some(500)), "{started}");
    let job_path = format!("/api/v1/replays/{}", started["replay_id"].as_str().unwrap());
    let (status, job) = app.get(&job_path, &token).await;
    assert_eq!((status, job["kind"].as_str(), job["state"].as_str()), (200, Some("events"), Some("running")), "{job}");
    assert_eq!(job["request"]["subscription_id"], sub_id);

    run_to_the_end(&app).await;
    let (_, job) = app.get(&job_path, &token).await;
    assert_eq!((job["state"].as_str(), job["replayed"].as_u64()), (Some("done"), Some(EVENTS as u64)), "{job}");
    assert!(job["finished_at"].is_string(), "{job}");
    // One message from the publish and one from the replay, for every event.
    assert_eq!(messages_of(&app.services.db, &sub_id).await, (2 * EVENTS as i64, EVENTS as i64));
    let (_, audit) = app.get("/api/v1/audit-log?action=events.replay", &token).await;
    assert_eq!(audit["data"][0]["detail"]["replay_id"], started["replay_id"], "the audit row is the job's: {audit}");
}

#[tokio::test]
async fn a_job_taken_over_after_its_lease_ended_commits_nothing_more_for_its_first_holder() {
    let app = TestApp::start().await;
    let receiver = TestReceiver::start().await;
    let (token, sub_id, window) = archive(&app, &receiver).await;
    let (_, started) = app.post("/api/v1/events/replay", &token, window).await;
    let id = started["replay_id"].as_str().unwrap().into();
    let (p, db) = (&app.services.pipeline, &app.services.db);

    // The first holder leases it, then stops answering; after its lease another takes it.
    let now = app.now_ms();
    let first = jobs::lease_next(db, 1, now, replays::lease_until(now)).await.unwrap().expect("a job to lease");
    app.advance_secs(16.0);
    let now = app.now_ms();
    let second = jobs::lease_next(db, 2, now, replays::lease_until(now)).await.unwrap().expect("the job, free again");
    assert_eq!(first.id, second.id);
    let txn = db.begin().await.unwrap();
    assert!(
        matches!(replays::step(p, &txn, &first, 1, 500).await.unwrap(), Step::Lost),
        "the first holder's batch is refused"
    );
    txn.rollback().await.unwrap();

    let mut job = second;
    loop {
        let txn = db.begin().await.unwrap();
        let Step::Done { due, last, cursor } = replays::step(p, &txn, &job, 2, 500).await.unwrap() else {
            panic!("the holder's batch is taken")
        };
        p.commit_and_wake(txn, due).await.unwrap();
        if last {
            break;
        }
        job.cursor = cursor;
    }
    let job = jobs::get(db, &id).await.unwrap().unwrap();
    assert_eq!((job.state.as_str(), job.replayed), ("done", EVENTS as i64));
    assert_eq!(messages_of(db, &sub_id).await, (2 * EVENTS as i64, EVENTS as i64));
}

#[tokio::test]
async fn a_cancelled_job_replays_nothing_more_and_a_job_is_its_customers_alone() {
    let app = TestApp::start().await;
    let receiver = TestReceiver::start().await;
    let (token, sub_id, window) = archive(&app, &receiver).await;
    let (_, other) = app.customer("globex").await;
    let (_, started) = app.post("/api/v1/events/replay", &token, window).await;
    let job_path = format!("/api/v1/replays/{}", started["replay_id"].as_str().unwrap());

    for (method, token) in [(reqwest::Method::GET, &other), (reqwest::Method::DELETE, &other)] {
        assert_eq!(app.call(method, &job_path, Some(token), None).await.0, 404, "another customer's job is not found");
    }
    assert_eq!(app.get("/api/v1/replays/rpl_01M8EEPPSC8BRBJB7V8EGXG3YG", &token).await.0, 404);
    let (status, cancelled) = app.call(reqwest::Method::DELETE, &job_path, Some(&token), None).await;
    assert_eq!(
        (status, cancelled["state"].as_str(), cancelled["replayed"].as_u64()),
        (200, Some("cancelled"), Some(500))
    );
    assert!(!replays::work_one_batch(&app.services.pipeline).await.unwrap(), "no job runs");
    assert_eq!(messages_of(&app.services.db, &sub_id).await.0, EVENTS as i64 + 500, "what was replayed stays");
    let (status, problem) = app.call(reqwest::Method::DELETE, &job_path, Some(&token), None).await;
    assert_eq!(status, 409, "{problem}");
    let (_, admin_view) = app.get(&job_path, ADMIN_TOKEN).await;
    assert_eq!(admin_view["state"], "cancelled");
    let (_, audit) = app.get("/api/v1/audit-log?action=replay.cancel", &token).await;
    assert_eq!(audit["data"].as_array().unwrap().len(), 1, "{audit}");
}

#[tokio::test]
async fn a_bulk_replay_of_many_dead_messages_is_a_job_too() {
    // The circuit stays closed however many attempts fail, so that every message dies of its one attempt.
    let app = TestApp::start_with(|s| {
        s.breaker.min_attempts = 1_000_000;
        s.breaker.disable_consecutive = 1_000_000;
        s.breaker.lock_consecutive = 1_000_000;
        s.breaker.lock_consecutive_any = 1_000_000;
    })
    .await;
    let receiver = TestReceiver::start().await;
    for _ in 0..600 {
        receiver.answer(500);
    }
    let (_, token) = app.customer("acme").await;
    let policy = json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 1});
    let sub = app
        .subscribe(&token, json!({"name": "s", "url": receiver.url, "event_types": ["t"], "retry_policy": policy}))
        .await;
    let sub_id = sub["id"].as_str().unwrap();
    publish_many(&app, &token, 600).await;
    // The messages the publish handed to the lanes (not running here) come due when their lease ends;
    // each tick attempts what the endpoint's concurrency allows, the rest come due a moment later.
    app.advance_secs(120.0);
    for _ in 0..1000 {
        app.advance_secs(1.0);
        if app.deliver_fresh().await + app.deliver_retries().await == 0 {
            break;
        }
    }
    let (_, dead) = app.get(&format!("/api/v1/messages?state=dead&subscription_id={sub_id}&limit=1"), &token).await;
    assert_eq!(dead["data"].as_array().unwrap().len(), 1, "the messages died: {dead}");

    let (status, started) = app.post("/api/v1/messages/replay", &token, json!({"state": "dead"})).await;
    assert_eq!((status, started["state"].as_str(), started["replayed"].as_u64()), (202, Some("running"), Some(500)));
    run_to_the_end(&app).await;
    let (_, job) = app.get(&format!("/api/v1/replays/{}", started["replay_id"].as_str().unwrap()), &token).await;
    assert_eq!(
        (job["kind"].as_str(), job["state"].as_str(), job["replayed"].as_u64()),
        (Some("messages"), Some("done"), Some(600))
    );
    let (_, still) = app.get(&format!("/api/v1/messages?state=dead&subscription_id={sub_id}"), &token).await;
    assert!(still["data"].as_array().unwrap().is_empty(), "every dead message is due again: {still}");
}
