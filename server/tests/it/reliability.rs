//! The delivery rules over time: schedules walked in virtual time, the circuit
//! breaker's states at small thresholds, held messages, unlock and per-endpoint
//! concurrency. The worker runs tick by tick under a manual clock.

use crate::common;

use common::{ADMIN_TOKEN, TestApp, TestReceiver};
use domain::ids::EndpointId;
use serde_json::{Value, json};

async fn endpoint(app: &TestApp, key: &str) -> Value {
    let (status, page) = app.get("/api/v1/endpoints", key).await;
    assert_eq!(status, 200);
    page["data"][0].clone()
}

fn small_breaker(s: &mut herald::Settings) {
    s.breaker.disable_consecutive = 5;
    s.breaker.probe_secs = 2;
    s.breaker.lock_consecutive = 9;
    s.breaker.lock_silence_secs = 0;
}

#[tokio::test]
async fn a_workfront_subscription_walks_its_schedule_for_fifty_hours() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "s", "url": rx.url, "event_types": ["*"], "retry_policy": "workfront"})).await;
    for _ in 0..20 {
        rx.answer(503);
    }
    let msg = app.publish(&key, "e1", "t").await["message_ids"][0].as_str().unwrap().to_string();
    let start = app.now_ms();
    app.deliver_fresh().await;
    let fifty_hours = start + 50 * 3600 * 1000;
    loop {
        let next = app.message(&key, &msg).await["next_attempt_at"].as_str().map(str::to_string);
        let Some(next) = next else { break };
        let due = chrono::DateTime::parse_from_rfc3339(&next).unwrap().timestamp_millis();
        assert!(due <= fifty_hours, "an attempt was scheduled after 50 hours");
        app.clock.set_ms(due - 1);
        assert_eq!(app.deliver_retries().await, 0, "nothing is sent before its time");
        app.clock.set_ms(due);
        assert_eq!(app.deliver_retries().await, 1);
    }
    let detail = app.message(&key, &msg).await;
    assert_eq!((detail["state"].as_str(), detail["dead_reason"].as_str()), (Some("dead"), Some("attempts_exhausted")));
    let offsets: Vec<i64> = detail["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            chrono::DateTime::parse_from_rfc3339(a["started_at"].as_str().unwrap()).unwrap().timestamp_millis() - start
        })
        .collect();
    let expected: Vec<i64> = (0..12).map(|n| ((1i64 << n) - 1) * 84_800).collect();
    assert_eq!(offsets, expected);
    assert_eq!(rx.seen().len(), 12);
}

#[tokio::test]
async fn the_breaker_disables_probes_locks_and_the_admin_unlocks() {
    let app = TestApp::start_with(small_breaker).await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let policy = json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 100});
    app.subscribe(&key, json!({"name": "s", "url": rx.url, "event_types": ["*"], "retry_policy": policy})).await;
    for _ in 0..10 {
        rx.answer(503);
    }
    let msg = app.publish(&key, "e1", "t").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    for _ in 0..4 {
        app.advance_secs(1.0);
        app.deliver_retries().await;
    }
    let ep = endpoint(&app, &key).await;
    assert_eq!((ep["state"].as_str(), ep["consecutive_failures"].as_u64()), (Some("disabled"), Some(5)));
    assert_eq!(ep["window_failures"], 5);
    assert!(ep["next_probe_at"].is_string());

    // Disabled: the due retry waits for the probe without spending an attempt.
    app.advance_secs(1.0);
    assert_eq!(app.deliver_retries().await, 1);
    assert_eq!(rx.seen().len(), 5);
    let waiting = app.message(&key, &msg).await;
    assert_eq!((waiting["state"].as_str(), waiting["attempt_count"].as_u64()), (Some("pending"), Some(5)));
    // One probe every 2 s; the 10th consecutive failure (more than 9) locks.
    for probe in 6..=10 {
        app.advance_secs(1.0);
        app.deliver_retries().await;
        assert_eq!(rx.seen().len(), probe, "probe {probe} at its time");
        app.advance_secs(1.0);
        app.deliver_retries().await;
        assert_eq!(rx.seen().len(), probe, "no probe before its time");
    }
    let ep = endpoint(&app, &key).await;
    assert_eq!(ep["state"], "locked");
    assert_eq!(app.message(&key, &msg).await["state"], "held");
    let second = app.publish(&key, "e2", "t").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    app.advance_secs(3600.0);
    app.deliver_retries().await;
    assert_eq!(rx.seen().len(), 10, "a locked endpoint receives nothing, not even probes");
    assert_eq!(app.message(&key, &second).await["state"], "held");

    let ep_id = ep["id"].as_str().unwrap();
    assert_eq!(app.post(&format!("/api/v1/endpoints/{ep_id}/unlock"), &key, json!({})).await.0, 403);
    let (status, unlocked) = app.post(&format!("/api/v1/endpoints/{ep_id}/unlock"), ADMIN_TOKEN, json!({})).await;
    assert_eq!(
        (status, unlocked["state"].as_str(), unlocked["consecutive_failures"].as_u64()),
        (200, Some("closed"), Some(0))
    );
    assert_eq!(app.deliver_retries().await + app.deliver_fresh().await, 2);
    for id in [&msg, &second] {
        assert_eq!(app.message(&key, id).await["state"], "delivered");
    }
    let (_, audit) = app.get("/api/v1/audit-log", ADMIN_TOKEN).await;
    let entry = &audit["data"][0];
    assert_eq!((entry["action"].as_str(), entry["target"].as_str()), (Some("endpoint.unlock"), Some(ep_id)));
    assert_eq!(entry["detail"]["released_messages"], 2);
    // Herald's own circuit changes are in the log too, by the actor `system`.
    let system: Vec<(&str, &str)> = audit["data"].as_array().unwrap()[1..3]
        .iter()
        .map(|row| (row["actor"].as_str().unwrap(), row["action"].as_str().unwrap()))
        .collect();
    assert_eq!(system, [("system", "endpoint.lock"), ("system", "endpoint.disable")], "{audit}");
    assert_eq!(audit["data"][1]["detail"]["consecutive_failures"], 10);
}

#[tokio::test]
async fn a_successful_probe_closes_the_circuit_and_waiting_messages_flow() {
    let app = TestApp::start_with(small_breaker).await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let policy = json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 100});
    app.subscribe(&key, json!({"name": "s", "url": rx.url, "event_types": ["*"], "retry_policy": policy})).await;
    for _ in 0..5 {
        rx.answer(500);
    }
    let first = app.publish(&key, "e1", "t").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    for _ in 0..4 {
        app.advance_secs(1.0);
        app.deliver_retries().await;
    }
    assert_eq!(endpoint(&app, &key).await["state"], "disabled");
    // New messages wait for the probe too.
    let mut waiting = Vec::new();
    for i in 0..2 {
        waiting.push(app.publish(&key, &format!("w{i}"), "t").await["message_ids"][0].as_str().unwrap().to_string());
    }
    app.deliver_fresh().await;
    assert_eq!(rx.seen().len(), 5);
    app.advance_secs(2.0);
    app.deliver_retries().await;
    assert_eq!(rx.seen().len(), 6, "one probe");
    assert_eq!(endpoint(&app, &key).await["state"], "closed");
    app.deliver_fresh().await;
    assert_eq!(rx.seen().len(), 8, "after the probe, the others flow");
    for id in waiting.iter().chain([&first]) {
        let m = app.message(&key, id).await;
        assert_eq!(m["state"], "delivered", "{id}");
    }
    assert_eq!(app.message(&key, &waiting[0]).await["attempt_count"], 1, "waiting spent no attempts");
}

#[tokio::test]
async fn held_messages_expire_at_their_ttl() {
    let app = TestApp::start_with(small_breaker).await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let policy = json!({"kind": "schedule", "delays_secs": [2], "max_attempts": 100, "ttl_secs": 60});
    app.subscribe(&key, json!({"name": "s", "url": rx.url, "event_types": ["*"], "retry_policy": policy})).await;
    for _ in 0..20 {
        rx.answer(503);
    }
    let msg = app.publish(&key, "e1", "t").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    for _ in 0..20 {
        app.advance_secs(2.0);
        app.deliver_retries().await;
    }
    assert_eq!(endpoint(&app, &key).await["state"], "locked");
    assert_eq!(app.message(&key, &msg).await["state"], "held");
    app.clock.advance_ms(60_000);
    app.deliver_retries().await;
    let m = app.message(&key, &msg).await;
    assert_eq!((m["state"].as_str(), m["dead_reason"].as_str()), (Some("dead"), Some("expired")));
}

#[tokio::test]
async fn one_endpoint_gets_at_most_its_share_of_workers() {
    let app = TestApp::start_with(|s| s.delivery.endpoint_concurrency = 1).await;
    let slow = TestReceiver::start().await;
    let other = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "a", "url": slow.url, "event_types": ["a"]})).await;
    app.subscribe(&key, json!({"name": "b", "url": other.url, "event_types": ["b"]})).await;
    for i in 0..3 {
        app.publish(&key, &format!("a{i}"), "a").await;
    }
    app.publish(&key, "b0", "b").await;
    app.deliver_fresh().await;
    assert_eq!((slow.seen().len(), other.seen().len()), (1, 1), "one at a time per endpoint");
    assert_eq!(app.deliver_fresh().await, 0, "the others wait a moment rather than being claimed again at once");
    for _ in 0..2 {
        app.advance_secs(0.2);
        app.deliver_fresh().await;
    }
    assert_eq!(slow.seen().len(), 3);
    let (_, page) = app.get("/api/v1/messages?state=delivered", &key).await;
    let counts: Vec<u64> =
        page["data"].as_array().unwrap().iter().map(|m| m["attempt_count"].as_u64().unwrap()).collect();
    assert_eq!(counts, vec![1; 4], "a message put back spent no attempt");
}

#[tokio::test]
async fn one_batch_saves_the_circuits_of_several_endpoints() {
    use domain::breaker::Circuit;
    use domain::states::EndpointState;
    use herald::store::endpoints::{by_ids, circuit_of, save_circuits};

    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    for n in 1..=2 {
        app.subscribe(
            &key,
            json!({"name": format!("s{n}"), "url": format!("http://127.0.0.1:9/{n}"), "event_types": ["*"]}),
        )
        .await;
    }
    let (status, page) = app.get("/api/v1/endpoints", &key).await;
    assert_eq!(status, 200);
    let mut ids: Vec<EndpointId> =
        page["data"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().into()).collect();
    ids.sort();
    assert_eq!(ids.len(), 2);

    let failing = Circuit { consecutive_failures: 3, last_failure_at: Some(5), ..Circuit::closed() };
    let disabled = Circuit { state: EndpointState::Disabled, next_probe_at: Some(9), ..Circuit::closed() };
    save_circuits(&app.services.db, &[(ids[0].clone(), failing), (ids[1].clone(), disabled)], 10).await.unwrap();

    let mut saved = by_ids(&app.services.db, ids.clone()).await.unwrap();
    saved.sort_by(|a, b| a.id.cmp(&b.id));
    let (first, second) = (circuit_of(&saved[0]), circuit_of(&saved[1]));
    assert_eq!((first.state, first.consecutive_failures, first.last_failure_at), (EndpointState::Closed, 3, Some(5)));
    assert_eq!((second.state, second.next_probe_at), (EndpointState::Disabled, Some(9)));
    assert_eq!((saved[0].updated_at, saved[1].updated_at), (10, 10));
}

/// Fails deliveries until the endpoint locks; returns the endpoint's id and the first message's.
async fn lock_endpoint(app: &TestApp, key: &str, rx: &TestReceiver) -> (String, String) {
    let policy = json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 100});
    app.subscribe(key, json!({"name": "s", "url": rx.url, "event_types": ["*"], "retry_policy": policy})).await;
    for _ in 0..10 {
        rx.answer(503);
    }
    let msg = app.publish(key, "seed", "t").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    for _ in 0..30 {
        if endpoint(app, key).await["state"] == "locked" {
            break;
        }
        app.advance_secs(1.0);
        app.deliver_retries().await;
    }
    let ep = endpoint(app, key).await;
    assert_eq!(ep["state"], "locked");
    (ep["id"].as_str().unwrap().to_string(), msg)
}

async fn unlock(app: &TestApp, endpoint_id: &str, body: Value) -> (u16, Value) {
    app.post(&format!("/api/v1/endpoints/{endpoint_id}/unlock"), ADMIN_TOKEN, body).await
}

#[tokio::test]
async fn an_unlock_can_end_the_held_backlog_older_than_a_time_and_deliver_the_rest() {
    let app = TestApp::start_with(small_breaker).await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let (ep_id, seed) = lock_endpoint(&app, &key, &rx).await;
    let old = app.publish(&key, "old", "t").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    app.advance_secs(7200.0);
    let new = app.publish(&key, "new", "t").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    for id in [&seed, &old, &new] {
        assert_eq!(app.message(&key, id).await["state"], "held");
    }

    for (body, field) in [
        (json!({"backlog": "dead_older_than"}), "older_than_secs"),
        (json!({"backlog": "later"}), "backlog"),
        (json!({"older_than_secs": 60}), "older_than_secs"),
        (json!({"backlog": "dead_older_than", "older_than_secs": 0}), "older_than_secs"),
        (json!({"backlog": "dead", "other": 1}), "other"),
    ] {
        let (status, problem) = unlock(&app, &ep_id, body.clone()).await;
        assert_eq!((status, problem["errors"][0]["field"].as_str()), (422, Some(field)), "{body}: {problem}");
    }
    assert_eq!(endpoint(&app, &key).await["state"], "locked", "a refused unlock changes nothing");

    let (status, unlocked) = unlock(&app, &ep_id, json!({"backlog": "dead_older_than", "older_than_secs": 3600})).await;
    assert_eq!((status, unlocked["state"].as_str()), (200, Some("closed")), "{unlocked}");
    for id in [&seed, &old] {
        let m = app.message(&key, id).await;
        assert_eq!((m["state"].as_str(), m["dead_reason"].as_str()), (Some("dead"), Some("expired")), "{m}");
    }
    assert_eq!(app.deliver_retries().await + app.deliver_fresh().await, 1);
    assert_eq!(app.message(&key, &new).await["state"], "delivered");
    let (_, audit) = app.get("/api/v1/audit-log", ADMIN_TOKEN).await;
    let detail = &audit["data"][0]["detail"];
    assert_eq!(
        (&detail["backlog"], &detail["older_than_secs"], &detail["dead_messages"], &detail["released_messages"]),
        (&json!("dead_older_than"), &json!(3600), &json!(2), &json!(1)),
        "{detail}"
    );
}

#[tokio::test]
async fn an_unlock_can_end_the_whole_held_backlog() {
    let app = TestApp::start_with(small_breaker).await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let (ep_id, seed) = lock_endpoint(&app, &key, &rx).await;
    let (status, _) = unlock(&app, &ep_id, json!({"backlog": "dead"})).await;
    assert_eq!(status, 200);
    assert_eq!(app.message(&key, &seed).await["dead_reason"], "expired");
    assert_eq!(app.deliver_retries().await + app.deliver_fresh().await, 0);
}

#[tokio::test]
async fn unlocking_a_closed_endpoint_is_a_conflict_that_writes_nothing() {
    let app = TestApp::start_with(small_breaker).await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "s", "url": rx.url, "event_types": ["*"]})).await;
    rx.answer(503);
    app.publish(&key, "e1", "t").await;
    app.deliver_fresh().await;
    let before = endpoint(&app, &key).await;
    assert_eq!((before["state"].as_str(), before["consecutive_failures"].as_u64()), (Some("closed"), Some(1)));

    let (status, problem) = unlock(&app, before["id"].as_str().unwrap(), json!({})).await;
    assert_eq!(status, 409, "{problem}");
    assert_eq!(endpoint(&app, &key).await, before, "the counters are kept");
    let (_, audit) = app.get("/api/v1/audit-log", ADMIN_TOKEN).await;
    assert!(audit["data"].as_array().unwrap().iter().all(|row| row["action"] != "endpoint.unlock"), "{audit}");
}

#[tokio::test]
async fn a_message_waiting_for_a_far_probe_ends_expired_at_its_ttl() {
    let app = TestApp::start_with(|s| {
        s.breaker.disable_consecutive = 1;
        s.breaker.probe_secs = 600;
    })
    .await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let policy =
        json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 100, "ttl_secs": 5});
    app.subscribe(&key, json!({"name": "s", "url": rx.url, "event_types": ["*"], "retry_policy": policy})).await;
    rx.answer(503);
    let published = app.now_ms();
    let msg = app.publish(&key, "e1", "t").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    assert_eq!(endpoint(&app, &key).await["state"], "disabled");

    // The retry comes due and waits for the probe, ten minutes away: but only until its TTL ends.
    app.advance_secs(1.0);
    assert_eq!(app.deliver_retries().await, 1);
    let waiting = app.message(&key, &msg).await;
    let due = chrono::DateTime::parse_from_rfc3339(waiting["next_attempt_at"].as_str().unwrap()).unwrap();
    assert_eq!((waiting["state"].as_str(), due.timestamp_millis()), (Some("pending"), published + 5_001));
    app.clock.set_ms(published + 5_001);
    app.deliver_retries().await;
    let ended = app.message(&key, &msg).await;
    assert_eq!((ended["state"].as_str(), ended["dead_reason"].as_str()), (Some("dead"), Some("expired")), "{ended}");
    assert_eq!(ended["attempt_count"], 1, "no probe was spent on it");
}

async fn endpoint_of_url(app: &TestApp, key: &str, url: &str) -> Value {
    let (_, page) = app.get("/api/v1/endpoints", key).await;
    // Stored as parsed: a bare origin gains its "/".
    let same = |e: &&Value| e["url"].as_str().map(|u| u.trim_end_matches('/')) == Some(url.trim_end_matches('/'));
    page["data"].as_array().unwrap().iter().find(same).cloned().expect("an endpoint")
}

async fn change_url(app: &TestApp, key: &str, url: &str) {
    let (_, subs) = app.get("/api/v1/subscriptions", key).await;
    let id = subs["data"][0]["id"].as_str().unwrap().to_string();
    let (status, body) = app
        .call(reqwest::Method::PATCH, &format!("/api/v1/subscriptions/{id}"), Some(key), Some(json!({"url": url})))
        .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn changing_the_url_moves_the_held_messages_to_the_new_endpoint() {
    let app = TestApp::start_with(small_breaker).await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let (_, seed) = lock_endpoint(&app, &key, &rx).await;
    let later = app.publish(&key, "e2", "t").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    assert_eq!(app.message(&key, &later).await["state"], "held");

    let fixed = TestReceiver::start().await;
    change_url(&app, &key, &format!("{}/new", fixed.url)).await;
    assert_eq!(app.deliver_retries().await + app.deliver_fresh().await, 2);
    for id in [&seed, &later] {
        assert_eq!(app.message(&key, id).await["state"], "delivered");
    }
    assert_eq!(fixed.seen().len(), 2);
    assert_eq!(endpoint_of_url(&app, &key, &rx.url).await["state"], "locked", "the old URL's circuit stays as it was");
    assert_eq!(endpoint_of_url(&app, &key, &format!("{}/new", fixed.url)).await["window_attempts"], 2);
}

#[tokio::test]
async fn a_replay_goes_through_the_subscriptions_current_url_and_its_circuit() {
    let app = TestApp::start().await;
    let (rx, moved) = (TestReceiver::start().await, TestReceiver::start().await);
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "s", "url": rx.url, "event_types": ["*"]})).await;
    let msg = app.publish(&key, "e1", "t").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    change_url(&app, &key, &moved.url).await;

    let (status, body) = app.post(&format!("/api/v1/messages/{msg}/replay"), &key, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(app.deliver_retries().await + app.deliver_fresh().await, 1);
    assert_eq!((rx.seen().len(), moved.seen().len()), (1, 1));
    assert_eq!(endpoint_of_url(&app, &key, &rx.url).await["window_attempts"], 1);
    assert_eq!(endpoint_of_url(&app, &key, &moved.url).await["window_attempts"], 1, "counted by the current URL");
}

/// The CloudEvents a receiver got, in order (structured mode: the body is the event).
fn events_seen(rx: &TestReceiver) -> Vec<Value> {
    rx.seen().iter().map(|seen| serde_json::from_slice(&seen.body).expect("a JSON CloudEvent")).collect()
}

fn types_of(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// One tick of each lane, a second apart.
async fn tick(app: &TestApp) {
    app.advance_secs(1.0);
    app.deliver_retries().await;
    app.deliver_fresh().await;
}

#[tokio::test]
async fn a_customer_hears_of_its_endpoints_changes_through_the_subscriptions_naming_them() {
    let app = TestApp::start_with(small_breaker).await;
    let (failing, told, everything, elsewhere) = (
        TestReceiver::start().await,
        TestReceiver::start().await,
        TestReceiver::start().await,
        TestReceiver::start().await,
    );
    let (_, key) = app.customer("acme").await;
    let (_, other_key) = app.customer("other").await;
    let types = json!(["herald.endpoint.disabled", "herald.endpoint.locked", "herald.endpoint.closed"]);
    let policy = json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 100});
    let orders =
        json!({"name": "orders", "url": failing.url, "event_types": ["order.created"], "retry_policy": policy});
    app.subscribe(&key, orders).await;
    // A subscription of the failing URL itself is never told of that URL's endpoint.
    app.subscribe(&key, json!({"name": "self", "url": failing.url, "event_types": types})).await;
    app.subscribe(&key, json!({"name": "ops", "url": told.url, "event_types": types})).await;
    app.subscribe(&key, json!({"name": "all", "url": everything.url, "event_types": ["*"]})).await;
    app.subscribe(&other_key, json!({"name": "ops", "url": elsewhere.url, "event_types": types})).await;
    for _ in 0..10 {
        failing.answer(503);
    }
    app.publish(&key, "e1", "order.created").await;
    app.deliver_fresh().await;
    for _ in 0..40 {
        tick(&app).await;
        if endpoint_of_url(&app, &key, &failing.url).await["state"] == "locked" {
            break;
        }
    }
    let ep = endpoint_of_url(&app, &key, &failing.url).await;
    let ep_id = ep["id"].as_str().unwrap().to_string();
    let (status, _) = unlock(&app, &ep_id, json!({"backlog": "dead"})).await;
    assert_eq!(status, 200);
    tick(&app).await;

    let heard = events_seen(&told);
    assert_eq!(types_of(&heard), ["herald.endpoint.disabled", "herald.endpoint.locked", "herald.endpoint.closed"]);
    let facts: Vec<(&str, u64, &str)> = heard
        .iter()
        .map(|e| {
            assert_eq!(
                (e["source"].as_str(), e["data"]["endpoint_id"].as_str()),
                (Some("/herald"), Some(ep_id.as_str()))
            );
            assert_eq!(e["data"]["url"], ep["url"]);
            let data = &e["data"];
            (
                data["state"].as_str().unwrap(),
                data["consecutive_failures"].as_u64().unwrap(),
                data["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        facts,
        [("disabled", 5, "consecutive_failures"), ("locked", 10, "no_success_for_too_long"), ("closed", 0, "unlocked")]
    );
    assert_eq!(heard[0]["data"]["window_failures"], 5);
    assert!(types_of(&events_seen(&everything)).iter().all(|t| *t == "order.created"), "`*` does not match them");
    assert!(
        types_of(&events_seen(&failing)).iter().all(|t| *t == "order.created"),
        "nor does the endpoint hear of itself"
    );
    assert!(elsewhere.seen().is_empty(), "another customer hears nothing");

    // They are events and messages like any other: in the delivery log, delivered.
    let (_, log) = app.get("/api/v1/messages?event_type=herald.endpoint.closed", &key).await;
    let rows = log["data"].as_array().unwrap();
    assert_eq!((rows.len(), rows[0]["state"].as_str()), (1, Some("delivered")), "{log}");
    let (_, audit) = app.get("/api/v1/audit-log?action=endpoint.disable", ADMIN_TOKEN).await;
    assert_eq!(audit["data"][0]["detail"]["reason"], "consecutive_failures", "{audit}");
}

#[tokio::test]
async fn every_way_a_message_dies_is_reported_once_and_a_report_never_reports_its_own_death() {
    let app = TestApp::start_with(small_breaker).await;
    let rx = TestReceiver::start().await;
    let told = TestReceiver::start().await;
    let refusing = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let once = json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 1});
    let short = json!({"kind": "schedule", "delays_secs": [2], "max_attempts": 100, "ttl_secs": 60});
    app.subscribe(&key, json!({"name": "a", "url": rx.url, "event_types": ["a"], "retry_policy": once})).await;
    let doomed = app.subscribe(&key, json!({"name": "c", "url": format!("{}/c", rx.url), "event_types": ["c"]})).await;
    app.subscribe(
        &key,
        json!({"name": "h", "url": format!("{}/h", rx.url), "event_types": ["h"], "retry_policy": short}),
    )
    .await;
    app.subscribe(&key, json!({"name": "ops", "url": told.url, "event_types": ["herald.message.dead"]})).await;
    // Its reports die at their first failure, and their deaths are not reported.
    let refused =
        json!({"name": "x", "url": refusing.url, "event_types": ["herald.message.dead"], "retry_policy": once});
    app.subscribe(&key, refused).await;
    for _ in 0..20 {
        refusing.answer(503);
    }

    // Herald's own types cannot be published.
    let forged = json!({"specversion": "1.0", "id": "f", "source": "/x", "type": "herald.message.dead"});
    let (status, problem) = app.post("/api/v1/events", &key, forged.clone()).await;
    assert_eq!((status, problem["errors"][0]["field"].as_str()), (422, Some("type")), "{problem}");
    let fine = json!({"specversion": "1.0", "id": "g", "source": "/x", "type": "a"});
    let (status, problem) = app.post("/api/v1/events", &key, json!([fine, forged])).await;
    assert_eq!((status, problem["errors"][0]["field"].as_str()), (422, Some("[1].type")), "{problem}");

    // Attempts exhausted (recorded), the subscription deleted (pending), held past the TTL (swept).
    rx.answer(503);
    let a = app.publish(&key, "a1", "a").await["message_ids"][0].as_str().unwrap().to_string();
    let c = app.publish(&key, "c1", "c").await["message_ids"][0].as_str().unwrap().to_string();
    let doomed_id = doomed["id"].as_str().unwrap();
    assert_eq!(
        app.call(reqwest::Method::DELETE, &format!("/api/v1/subscriptions/{doomed_id}"), Some(&key), None).await.0,
        204
    );
    app.deliver_fresh().await;
    let h_url = format!("{}/h", rx.url);
    let h = app.publish(&key, "h1", "h").await["message_ids"][0].as_str().unwrap().to_string();
    for _ in 0..25 {
        rx.answer(503);
    }
    for _ in 0..25 {
        app.advance_secs(2.0);
        app.deliver_retries().await;
        app.deliver_fresh().await;
    }
    assert_eq!(endpoint_of_url(&app, &key, &h_url).await["state"], "locked");
    app.clock.advance_ms(60_000);
    for _ in 0..3 {
        tick(&app).await;
    }
    assert_eq!(app.message(&key, &h).await["dead_reason"], "expired");

    let mut heard: Vec<Value> = events_seen(&told).into_iter().map(|e| e["data"].clone()).collect();
    heard.sort_by_key(|d| d["event_id"].as_str().unwrap().to_string());
    let facts: Vec<(&str, &str, &str, u64, Option<u64>)> = heard
        .iter()
        .map(|d| {
            (
                d["message_id"].as_str().unwrap(),
                d["event_id"].as_str().unwrap(),
                d["dead_reason"].as_str().unwrap(),
                d["attempt_count"].as_u64().unwrap(),
                d["last_status"].as_u64(),
            )
        })
        .collect();
    assert_eq!(
        facts,
        [
            (a.as_str(), "a1", "attempts_exhausted", 1, Some(503)),
            (c.as_str(), "c1", "subscription_deleted", 0, None),
            (h.as_str(), "h1", "expired", 10, Some(503)),
        ],
        "one report per death, none about the reports that died at the refusing receiver"
    );
    assert!(heard.iter().all(|d| d["event_source"] == "/test"));
    assert_eq!(refusing.seen().len(), 3, "the refusing receiver got each report once");
    let (_, log) = app.get("/api/v1/messages?event_type=herald.message.dead&state=dead", &key).await;
    assert_eq!(log["data"].as_array().unwrap().len(), 3, "{log}");
}

#[tokio::test]
async fn history_past_its_retention_is_removed_while_open_messages_and_their_events_stay() {
    use herald::pipeline::retention::{Swept, sweep};
    let app = TestApp::start_with(|s| {
        s.retention.messages_secs = 600;
        s.retention.events_secs = 3600;
    })
    .await;
    let (rx, failing) = (TestReceiver::start().await, TestReceiver::start().await);
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "a", "url": rx.url, "event_types": ["a"]})).await;
    let tomorrow = json!({"kind": "schedule", "delays_secs": [86400], "max_attempts": 5, "ttl_secs": 604800});
    app.subscribe(&key, json!({"name": "b", "url": failing.url, "event_types": ["b"], "retry_policy": tomorrow})).await;
    failing.answer(503);
    app.catch_up_with_real_time();
    let delivered = app.publish(&key, "e1", "a").await["message_ids"][0].as_str().unwrap().to_string();
    let waiting = app.publish(&key, "e2", "b").await["message_ids"][0].as_str().unwrap().to_string();
    assert_eq!(app.deliver_fresh().await, 2);
    let pipeline = &app.services.pipeline;

    app.advance_secs(599.0);
    assert_eq!(sweep(pipeline).await.unwrap(), Swept::default(), "nothing has passed its time yet");
    app.advance_secs(2.0);
    assert_eq!(sweep(pipeline).await.unwrap(), Swept { messages: 1, attempts: 1, events: 0 });
    assert_eq!(app.get(&format!("/api/v1/messages/{delivered}"), &key).await.0, 404);
    assert_eq!(app.message(&key, &waiting).await["state"], "pending", "an open message is never removed");
    assert_eq!(app.publish(&key, "e1", "a").await["duplicate"], true, "the event is kept longer than its message");

    app.advance_secs(3000.0);
    let fresh = app.publish(&key, "e3", "a").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    assert_eq!(sweep(pipeline).await.unwrap(), Swept { messages: 0, attempts: 0, events: 1 }, "e1's event goes");
    let republished = app.publish(&key, "e1", "a").await;
    assert_eq!(republished["duplicate"], false, "after its removal, the same (source, id) is a new event");
    let detail = app.message(&key, &waiting).await;
    assert_eq!(detail["event"]["id"], "e2", "the event an open message needs stays: {detail}");
    assert_eq!(app.message(&key, &fresh).await["state"], "delivered", "a message that ended lately stays");
}

#[tokio::test]
async fn a_message_kept_longer_than_its_event_is_listed_but_cannot_be_replayed() {
    use herald::pipeline::retention::{Swept, sweep};
    let app = TestApp::start_with(|s| {
        s.retention.messages_secs = 3600;
        s.retention.events_secs = 60;
    })
    .await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let once = json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 1});
    app.subscribe(&key, json!({"name": "a", "url": rx.url, "event_types": ["a"], "retry_policy": once})).await;
    rx.answer(503);
    app.catch_up_with_real_time();
    let id = app.publish(&key, "e1", "a").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    app.advance_secs(61.0);
    assert_eq!(sweep(&app.services.pipeline).await.unwrap(), Swept { messages: 0, attempts: 0, events: 1 });
    let detail = app.message(&key, &id).await;
    assert_eq!((detail["state"].as_str(), &detail["event"]), (Some("dead"), &Value::Null), "{detail}");
    let (status, problem) = app.post(&format!("/api/v1/messages/{id}/replay"), &key, json!({})).await;
    assert_eq!(status, 409, "{problem}");
    let (status, bulk) = app.post("/api/v1/messages/replay", &key, json!({"state": "dead"})).await;
    assert_eq!((status, &bulk["replayed"]), (202, &json!(0)), "{bulk}");
}

#[tokio::test]
async fn a_paused_subscription_holds_its_events_without_ageing_until_it_resumes() {
    let app = TestApp::start().await;
    let (rx, moved) = (TestReceiver::start().await, TestReceiver::start().await);
    let (_, key) = app.customer("acme").await;
    let policy = json!({"kind": "schedule", "delays_secs": [1], "max_attempts": 3, "ttl_secs": 60});
    let sub =
        app.subscribe(&key, json!({"name": "s", "url": rx.url, "event_types": ["a"], "retry_policy": policy})).await;
    let path = format!("/api/v1/subscriptions/{}", sub["id"].as_str().unwrap());
    let patch = |body: Value| app.call(reqwest::Method::PATCH, &path, Some(&key), Some(body));
    assert_eq!(patch(json!({"status": "paused"})).await.0, 200);

    let held = app.publish(&key, "e1", "a").await["message_ids"][0].as_str().unwrap().to_string();
    let m = app.message(&key, &held).await;
    assert_eq!((m["state"].as_str(), &m["next_attempt_at"]), (Some("held"), &Value::Null), "{m}");
    app.advance_secs(3600.0);
    app.deliver_retries().await;
    app.deliver_fresh().await;
    assert!(rx.seen().is_empty(), "nothing goes out while paused");
    assert_eq!(app.message(&key, &held).await["state"], "held", "a paused message does not age past its TTL");

    // A new URL while paused: the held message goes there when the subscription resumes.
    assert_eq!(patch(json!({"url": moved.url})).await.0, 200);
    assert_eq!(app.message(&key, &held).await["state"], "held");
    assert_eq!(patch(json!({"status": "active"})).await.0, 200);
    assert_eq!(app.deliver_fresh().await, 1);
    let m = app.message(&key, &held).await;
    assert_eq!((m["state"].as_str(), moved.seen().len(), rx.seen().len()), (Some("delivered"), 1, 0), "{m}");

    assert_eq!(patch(json!({"status": "paused"})).await.0, 200);
    let second = app.publish(&key, "e2", "a").await["message_ids"][0].as_str().unwrap().to_string();
    assert_eq!(app.call(reqwest::Method::DELETE, &path, Some(&key), None).await.0, 204);
    let m = app.message(&key, &second).await;
    assert_eq!((m["state"].as_str(), m["dead_reason"].as_str()), (Some("dead"), Some("subscription_deleted")));
}
