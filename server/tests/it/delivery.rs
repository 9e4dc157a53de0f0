//! Delivery end to end within one process: the real API, the real worker
//! (driven tick by tick under a manual clock) and a real HTTP receiver.

use crate::common;

use common::{TestApp, TestReceiver};
use domain::signing::SigningKey;
use serde_json::{Value, json};

async fn subscribe(app: &TestApp, key: &str, url: String, extra: Value) -> Value {
    let mut body = json!({"name": "s", "url": url, "event_types": ["order.created"]});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    app.subscribe(key, body).await
}

fn verify(secret: &str, seen: &common::Seen) -> bool {
    let key = SigningKey::from_secret(secret).unwrap();
    let id = seen.header("webhook-id");
    let ts: i64 = seen.header("webhook-timestamp").parse().unwrap();
    let expected = key.sign(id, ts, &seen.body);
    seen.header("webhook-signature").split(' ').any(|s| s == expected)
}

#[tokio::test]
async fn events_arrive_signed_in_both_content_modes_with_the_message_id() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let structured = subscribe(&app, &key, format!("{}/structured", rx.url), json!({})).await;
    let binary = subscribe(&app, &key, format!("{}/binary", rx.url), json!({"content_mode": "binary"})).await;
    let published = app.publish(&key, "e1", "order.created").await;
    app.publish(&key, "e2", "order.deleted").await;
    assert_eq!(app.deliver_fresh().await, 2);

    let seen = rx.seen();
    assert_eq!(seen.len(), 2);
    let ids: Vec<&str> = published["message_ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    for request in &seen {
        assert!(ids.contains(&request.header("webhook-id")));
        assert!(request.header("user-agent").starts_with("Herald/"));
        let secret = if request.path == "/structured" { &structured["secret"] } else { &binary["secret"] };
        assert!(verify(secret.as_str().unwrap(), request), "signature of {}", request.path);
    }
    let s = seen.iter().find(|r| r.path == "/structured").unwrap();
    assert_eq!(s.header("content-type"), "application/cloudevents+json");
    let event: Value = serde_json::from_slice(&s.body).unwrap();
    assert_eq!(
        (event["id"].as_str(), event["type"].as_str(), &event["data"]),
        (Some("e1"), Some("order.created"), &json!({"n": "e1"}))
    );
    let b = seen.iter().find(|r| r.path == "/binary").unwrap();
    assert_eq!((b.header("ce-id"), b.header("ce-type"), b.header("ce-specversion")), ("e1", "order.created", "1.0"));
    assert_eq!(serde_json::from_slice::<Value>(&b.body).unwrap(), json!({"n": "e1"}));

    let detail = app.message(&key, s.header("webhook-id")).await;
    assert_eq!((detail["state"].as_str(), detail["attempt_count"].as_u64()), (Some("delivered"), Some(1)));
    let attempt = &detail["attempts"][0];
    assert_eq!((attempt["status_code"].as_u64(), attempt["outcome"].as_str()), (Some(200), Some("success")));
    assert_eq!(attempt["response_body"], "ok");
    assert_eq!(detail["event"]["id"], "e1");
    assert_eq!(app.deliver_fresh().await + app.deliver_retries().await, 0, "nothing is left to send");
}

/// Quotes, backslashes, braces, commas and the word NULL, in every kind of
/// text a publish and a recorded attempt store.
const AWKWARD: &str = r#"a "quoted" \ back\\slash, {NULL}, NULL; é"#;

#[tokio::test]
async fn awkward_text_is_stored_and_sent_as_published() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let policy = json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 5});
    let subscription = json!({"name": AWKWARD, "url": rx.url, "event_types": ["*"], "retry_policy": policy});
    app.subscribe(&key, subscription).await;
    rx.answer_with(503, &[("x-note", AWKWARD)]);
    let data = json!({"text": AWKWARD, "list": [AWKWARD, null, "NULL"], "nested": {"\\": "}{"}, "more": "é ✓ 😀"});
    let event = json!({"specversion": "1.0", "id": AWKWARD, "source": AWKWARD, "type": AWKWARD, "data": data});
    let (status, body) = app.post("/api/v1/events", &key, event).await;
    assert_eq!(status, 202, "{body}");
    let message_id = body["events"][0]["message_ids"][0].as_str().unwrap().to_string();
    assert_eq!(app.deliver_fresh().await, 1);
    app.advance_secs(1.0);
    assert_eq!(app.deliver_retries().await, 1);

    let sent: Vec<Value> = rx.seen().iter().map(|r| serde_json::from_slice(&r.body).unwrap()).collect();
    assert_eq!(sent.len(), 2);
    for body in &sent {
        assert_eq!((&body["id"], &body["source"], &body["type"]), (&json!(AWKWARD), &json!(AWKWARD), &json!(AWKWARD)));
        assert_eq!(body["data"], data);
    }
    let detail = app.message(&key, &message_id).await;
    assert_eq!(detail["event_type"], AWKWARD);
    assert_eq!((&detail["event"]["id"], &detail["event"]["data"]), (&json!(AWKWARD), &data));
    let attempts = detail["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["response_headers"]["x-note"], AWKWARD);
    assert_eq!(attempts[1]["response_body"], "ok");
}

#[tokio::test]
async fn failures_are_retried_on_schedule_until_delivered() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let policy =
        json!({"retry_policy": {"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 2, "max_attempts": 5}});
    subscribe(&app, &key, rx.url.clone(), policy).await;
    rx.answer(503);
    rx.answer(503);
    let msg_id = app.publish(&key, "e1", "order.created").await["message_ids"][0].as_str().unwrap().to_string();

    assert_eq!(app.deliver_fresh().await, 1);
    assert_eq!(app.deliver_retries().await, 0, "not due before its delay");
    app.advance_secs(0.999);
    assert_eq!(app.deliver_retries().await, 0);
    app.advance_secs(0.001);
    assert_eq!(app.deliver_retries().await, 1);
    app.advance_secs(1.999);
    assert_eq!(app.deliver_retries().await, 0);
    app.advance_secs(0.001);
    assert_eq!(app.deliver_retries().await, 1);

    let ids: Vec<String> = rx.seen().iter().map(|r| r.header("webhook-id").to_string()).collect();
    assert_eq!(ids, vec![msg_id.clone(); 3]);
    let detail = app.message(&key, &msg_id).await;
    assert_eq!((detail["state"].as_str(), detail["attempt_count"].as_u64()), (Some("delivered"), Some(3)));
    let outcomes: Vec<&str> =
        detail["attempts"].as_array().unwrap().iter().map(|a| a["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, vec!["retryable", "retryable", "success"]);
}

#[tokio::test]
async fn hopeless_messages_die_with_their_reason_and_replay_revives_them() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let transient = json!({"retry_policy": {"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 3, "retry_on": "transient"}});
    subscribe(&app, &key, format!("{}/a", rx.url), transient).await;
    rx.answer(400);
    let msg = app.publish(&key, "e1", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    let detail = app.message(&key, &msg).await;
    assert_eq!((detail["state"].as_str(), detail["dead_reason"].as_str()), (Some("dead"), Some("non_retryable")));
    assert_eq!(detail["attempts"][0]["outcome"], "permanent");

    let (status, replayed) = app.post(&format!("/api/v1/messages/{msg}/replay"), &key, json!({})).await;
    assert_eq!((status, replayed["state"].as_str()), (200, Some("pending")));
    assert_eq!(app.deliver_retries().await, 1);
    let detail = app.message(&key, &msg).await;
    assert_eq!((detail["state"].as_str(), detail["attempt_count"].as_u64()), (Some("delivered"), Some(2)));
    let seen = rx.seen();
    assert_eq!(seen[0].header("webhook-id"), seen[1].header("webhook-id"));
    let (status, _) = app.post(&format!("/api/v1/messages/{msg}/replay"), &key, json!({})).await;
    assert_eq!(status, 200, "a delivered message can be sent again");
}

#[tokio::test]
async fn attempts_run_out_and_bulk_replay_brings_dead_messages_back() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let policy = json!({"retry_policy": {"kind": "schedule", "delays_secs": [1], "max_attempts": 3}});
    let sub = subscribe(&app, &key, rx.url.clone(), policy).await;
    for _ in 0..6 {
        rx.answer(503);
    }
    let a = app.publish(&key, "e1", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    let b = app.publish(&key, "e2", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    for _ in 0..2 {
        app.advance_secs(1.0);
        assert_eq!(app.deliver_retries().await, 2);
    }
    app.advance_secs(10.0);
    assert_eq!(app.deliver_retries().await, 0);
    for id in [&a, &b] {
        let d = app.message(&key, id).await;
        assert_eq!(
            (d["state"].as_str(), d["dead_reason"].as_str(), d["attempt_count"].as_u64()),
            (Some("dead"), Some("attempts_exhausted"), Some(3))
        );
    }
    let (status, page) =
        app.get(&format!("/api/v1/messages?state=dead&subscription_id={}", sub["id"].as_str().unwrap()), &key).await;
    assert_eq!((status, page["data"].as_array().unwrap().len()), (200, 2));

    let (status, result) = app.post("/api/v1/messages/replay", &key, json!({"state": "dead"})).await;
    assert_eq!((status, result["replayed"].as_u64()), (202, Some(2)));
    assert_eq!(app.deliver_retries().await, 2);
    for id in [&a, &b] {
        assert_eq!(app.message(&key, id).await["state"], "delivered");
    }
}

#[tokio::test]
async fn retry_after_is_honoured_and_the_ttl_ends_a_message() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let policy = json!({"retry_policy": {"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 10, "ttl_secs": 5}});
    subscribe(&app, &key, rx.url.clone(), policy).await;
    rx.answer_with(429, &[("retry-after", "3")]);
    for _ in 0..10 {
        rx.answer(500);
    }
    let msg = app.publish(&key, "e1", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    app.advance_secs(2.9);
    assert_eq!(app.deliver_retries().await, 0, "Retry-After: 3 is not cut short");
    app.advance_secs(0.1);
    assert_eq!(app.deliver_retries().await, 1);
    // The schedule runs from the first failure (retry n at n s): retries 2 and 3, whose times
    // passed while the receiver asked for 3 s, go at once; retry 4 waits for its time.
    assert_eq!(app.deliver_retries().await, 1);
    assert_eq!(app.deliver_retries().await, 1);
    assert_eq!(app.deliver_retries().await, 0, "retry 4 is due 4 s after the first failure");
    app.advance_secs(1.0);
    assert_eq!(app.deliver_retries().await, 1);
    app.advance_secs(1.0);
    assert_eq!(app.deliver_retries().await, 1);
    let d = app.message(&key, &msg).await;
    assert_eq!((d["state"].as_str(), d["dead_reason"].as_str()), (Some("dead"), Some("expired")));
    assert_eq!(d["attempt_count"], 6);
}

/// Retries are due at the first failure plus the policy's offsets, however long each attempt
/// takes: a receiver that takes most of its timeout does not push the schedule later.
#[tokio::test]
async fn slow_attempts_do_not_push_the_retry_schedule_later() {
    let app = TestApp::start().await;
    // A receiver that takes 8 s (of the test's clock) to answer 500.
    let clock = app.clock.clone();
    let slow = axum::Router::new().fallback(move || {
        let clock = clock.clone();
        async move {
            clock.advance_ms(8_000);
            axum::http::StatusCode::INTERNAL_SERVER_ERROR
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, slow).await });
    let (_, key) = app.customer("acme").await;
    let policy = json!({"retry_policy": {"kind": "schedule", "delays_secs": [10, 20, 40], "max_attempts": 4}});
    subscribe(&app, &key, url, policy.clone()).await;
    let (_, preview) = app.post("/api/v1/retry-policies/preview", &key, policy).await;
    let offsets: Vec<i64> = preview["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["offset_secs"].as_f64().unwrap() * 1000.0) as i64)
        .collect();
    assert_eq!(offsets, [0, 10_000, 30_000, 70_000]);

    let msg = app.publish(&key, "e1", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    let first_failure = app.now_ms();
    for offset in &offsets[1..] {
        let due = app.message(&key, &msg).await["next_attempt_at"].as_str().map(str::to_string).unwrap();
        let due = chrono::DateTime::parse_from_rfc3339(&due).unwrap().timestamp_millis();
        assert_eq!(due - first_failure, *offset, "retry due at its offset from the first failure");
        app.clock.set_ms(due);
        assert_eq!(app.deliver_retries().await, 1);
    }
    assert_eq!(app.message(&key, &msg).await["dead_reason"], "attempts_exhausted");
}

#[tokio::test]
async fn a_crashed_delivery_is_reclaimed_after_its_lease_without_spending_an_attempt() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    subscribe(&app, &key, rx.url.clone(), json!({})).await;
    let msg = app.publish(&key, "e1", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    // A worker claims the message and dies before sending.
    let now = app.now_ms();
    let claimed = herald::store::messages::claim(
        &app.services.db,
        herald::store::messages::Lane::Fresh,
        now,
        10,
        now + 90_000,
        7,
        herald::store::messages::Among::AllBut(&[]),
    )
    .await
    .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(app.deliver_fresh().await + app.deliver_retries().await, 0, "a leased message is not claimed twice");
    app.advance_secs(90.0);
    assert_eq!(app.deliver_retries().await, 1);
    let d = app.message(&key, &msg).await;
    assert_eq!((d["state"].as_str(), d["attempt_count"].as_u64()), (Some("delivered"), Some(1)));
    assert_eq!(rx.seen().len(), 1);
}

#[tokio::test]
async fn localhost_names_are_refused_like_loopback_addresses() {
    let app = TestApp::start_with(|s| s.allow_private_targets = false).await;
    let (_, key) = app.customer("acme").await;
    for url in ["http://localhost:9/x", "http://LOCALHOST./x", "http://api.localhost/x", "http://127.1:9/x"] {
        let body = json!({"name": "s", "url": url, "event_types": ["*"]});
        let (status, problem) = app.post("/api/v1/subscriptions", &key, body).await;
        assert_eq!((status, problem["errors"][0]["field"].as_str()), (422, Some("url")), "{url}: {problem}");
    }
    let sub = subscribe(&app, &key, "http://example.com/x".into(), json!({})).await;
    let path = format!("/api/v1/subscriptions/{}", sub["id"].as_str().unwrap());
    let (status, _) =
        app.call(reqwest::Method::PATCH, &path, Some(&key), Some(json!({"url": "http://localhost:9/x"}))).await;
    assert_eq!(status, 422, "a change of URL is checked the same way");
}

#[tokio::test]
async fn a_deleted_subscription_ends_its_waiting_messages() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let sub = subscribe(&app, &key, rx.url.clone(), json!({})).await;
    rx.answer(500);
    let msg = app.publish(&key, "e1", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    let (status, _) = app
        .call(
            reqwest::Method::DELETE,
            &format!("/api/v1/subscriptions/{}", sub["id"].as_str().unwrap()),
            Some(&key),
            None,
        )
        .await;
    assert_eq!(status, 204);
    let d = app.message(&key, &msg).await;
    assert_eq!((d["state"].as_str(), d["dead_reason"].as_str()), (Some("dead"), Some("subscription_deleted")));
    assert_eq!(d["attempts"].as_array().unwrap().len(), 1, "the history stays");
}

#[tokio::test]
async fn a_rotated_secret_signs_alongside_the_old_one_for_a_day() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let sub = subscribe(&app, &key, rx.url.clone(), json!({})).await;
    let (status, rotated) = app
        .post(&format!("/api/v1/subscriptions/{}/rotate-secret", sub["id"].as_str().unwrap()), &key, json!({}))
        .await;
    assert_eq!(status, 200);
    assert_ne!(rotated["secret"], sub["secret"]);
    app.publish(&key, "e1", "order.created").await;
    app.deliver_fresh().await;
    app.advance_secs(24.0 * 3600.0 + 1.0);
    app.publish(&key, "e2", "order.created").await;
    app.deliver_fresh().await;
    let seen = rx.seen();
    assert_eq!(seen[0].header("webhook-signature").split(' ').count(), 2);
    assert!(verify(sub["secret"].as_str().unwrap(), &seen[0]) && verify(rotated["secret"].as_str().unwrap(), &seen[0]));
    assert!(
        !verify(sub["secret"].as_str().unwrap(), &seen[1]) && verify(rotated["secret"].as_str().unwrap(), &seen[1])
    );
}

#[tokio::test]
async fn a_claim_takes_at_most_its_limit_and_never_a_message_twice() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "s", "url": "http://127.0.0.1:9/x", "event_types": ["*"]})).await;
    assert_eq!(app.publish_batch(&key, 300).await, 202);
    use herald::store::messages::{Among, Lane, claim};
    let now = app.now_ms();
    let first = claim(&app.services.db, Lane::Fresh, now, 128, now + 90_000, 1, Among::AllBut(&[])).await.unwrap();
    let second = claim(&app.services.db, Lane::Fresh, now, 500, now + 90_000, 2, Among::AllBut(&[])).await.unwrap();
    assert_eq!((first.len(), second.len()), (128, 172));
    let mut ids: Vec<&str> = first.iter().chain(&second).map(|m| m.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 300);
    assert!(
        claim(&app.services.db, Lane::Fresh, now, 10, now + 90_000, 3, Among::AllBut(&[])).await.unwrap().is_empty()
    );
}

/// Publishes that arrive together share one transaction; each still gets its
/// own answer, a repeated event is a duplicate naming the same messages, and
/// customers' events never mix.
#[tokio::test]
async fn concurrent_publishes_each_get_their_own_answer() {
    let app = TestApp::start().await;
    let (_, acme) = app.customer("acme").await;
    let (_, globex) = app.customer("globex").await;
    for key in [&acme, &globex] {
        app.subscribe(key, json!({"name": "s", "url": "http://127.0.0.1:9/x", "event_types": ["*"]})).await;
    }
    // Every id twice for acme and once for globex, all at once.
    let calls = (0..40).map(|i| {
        let (key, id) = match i % 3 {
            0 | 1 => (acme.clone(), format!("e{}", i / 3)),
            _ => (globex.clone(), format!("e{}", i / 3)),
        };
        let app = &app;
        async move { (key.clone(), id.clone(), app.publish(&key, &id, "t").await) }
    });
    let answers = futures::future::join_all(calls).await;
    let mut firsts: std::collections::HashMap<(String, String), Vec<Value>> = Default::default();
    for (key, id, answer) in answers {
        assert_eq!(answer["id"], id.as_str());
        assert_eq!(answer["message_ids"].as_array().unwrap().len(), 1, "{answer}");
        firsts.entry((key, id)).or_default().push(answer);
    }
    for ((_, id), seen) in &firsts {
        let fresh = seen.iter().filter(|a| a["duplicate"] == false).count();
        assert_eq!(fresh, 1, "{id} is stored once for its customer: {seen:?}");
        let ids: std::collections::HashSet<&Value> = seen.iter().map(|a| &a["message_ids"]).collect();
        assert_eq!(ids.len(), 1, "a duplicate names the first publish's messages");
    }
    let (_, acme_page) = app.get("/api/v1/messages?limit=1000", &acme).await;
    let (_, globex_page) = app.get("/api/v1/messages?limit=1000", &globex).await;
    assert_eq!(acme_page["data"].as_array().unwrap().len(), 14, "e0..e13 once each");
    assert_eq!(globex_page["data"].as_array().unwrap().len(), 13);
}

/// A publish hands its messages to the fresh lane already leased, even more
/// than the endpoint has slots for: those wait in the lane's queue, and only
/// what the queue cannot hold is left pending for a claim.
#[tokio::test]
async fn a_publish_hands_over_what_the_lanes_queue_can_hold() {
    use herald::pipeline::endpoint_permits::EndpointPermits;
    use herald::pipeline::handoff::Dispatch;
    use std::sync::Arc;

    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "s", "url": "http://127.0.0.1:9/x", "event_types": ["*"]})).await;
    // Ten workers, one permit at the endpoint, two permits of the queue.
    let mut lane =
        app.services.pipeline.handoff.open(Arc::new(tokio::sync::Semaphore::new(10)), EndpointPermits::new(1), 2, 2);
    assert_eq!(app.publish_batch(&key, 5).await, 202);
    let (mut started, mut waiting) = (Vec::new(), Vec::new());
    while let Ok(handed) = lane.try_recv() {
        match handed {
            Dispatch::Start(ready) => started.push(ready.job.message.id),
            Dispatch::Queue(job, _) => waiting.push(job.message.id),
        }
    }
    assert_eq!((started.len(), waiting.len()), (1, 2), "one starts, two wait for the endpoint");
    let (_, page) = app.get("/api/v1/messages?limit=100", &key).await;
    let state_of = |id: &str| page["data"].as_array().unwrap().iter().find(|m| m["id"] == id).unwrap()["state"].clone();
    for id in started.iter().chain(&waiting) {
        assert_eq!(state_of(id), "delivering", "a handed-over message is stored leased");
    }
    let pending = page["data"].as_array().unwrap().iter().filter(|m| m["state"] == "pending").count();
    assert_eq!(pending, 2, "the rest waits in the database for the lane's claim");
}

/// A stored event that cannot be rendered (here its payload was damaged in the database) ends its
/// message `dead` with an attempt that says so, at once, instead of being leased again forever;
/// the endpoint's circuit does not count it.
#[tokio::test]
async fn an_event_that_cannot_be_rendered_ends_its_message_with_an_attempt_saying_so() {
    use sea_orm::ConnectionTrait;
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    subscribe(&app, &key, rx.url.clone(), json!({"content_mode": "binary"})).await;
    let published = app.publish(&key, "e1", "order.created").await;
    let msg = published["message_ids"][0].as_str().unwrap().to_string();
    app.services.db.execute_unprepared("UPDATE events SET payload = 'not json'").await.unwrap();

    assert_eq!(app.deliver_fresh().await, 1);
    let m = app.message(&key, &msg).await;
    assert_eq!((m["state"].as_str(), m["dead_reason"].as_str()), (Some("dead"), Some("non_retryable")), "{m}");
    let attempts = m["attempts"].as_array().unwrap();
    assert_eq!((attempts.len(), attempts[0]["error_kind"].as_str()), (1, Some("other")), "{m}");
    assert!(rx.seen().is_empty(), "nothing was sent");
    let (_, endpoints) = app.get("/api/v1/endpoints", &key).await;
    assert_eq!(endpoints["data"][0]["consecutive_failures"], 0, "the receiver is not at fault");
    app.advance_secs(3600.0);
    assert_eq!(app.deliver_retries().await, 0, "never leased again");
}

#[tokio::test]
async fn a_410_pauses_the_subscription_holding_its_messages_until_it_resumes() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let retired = subscribe(&app, &key, format!("{}/retired", rx.url), json!({})).await;
    let id = retired["id"].as_str().unwrap().to_string();
    let told = json!({"event_types": ["herald.subscription.paused"]});
    let listener = subscribe(&app, &key, format!("{}/ops", rx.url), told).await;
    rx.answer(410);
    let first = app.publish(&key, "e1", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    assert_eq!(app.deliver_fresh().await, 1);

    let (_, sub) = app.get(&format!("/api/v1/subscriptions/{id}"), &key).await;
    assert_eq!(sub["status"], "paused", "a 410 retires the target: {sub}");
    let held = app.message(&key, &first).await;
    assert_eq!((held["state"].as_str(), held["attempt_count"].as_u64()), (Some("held"), Some(1)), "{held}");
    let (_, audit) = app.get("/api/v1/audit-log?action=subscription.pause", &key).await;
    let row = &audit["data"][0];
    assert_eq!((row["actor"].as_str(), row["target"].as_str()), (Some("system"), Some(id.as_str())), "{audit}");
    assert_eq!(row["detail"]["reason"], "gone");

    // The listener is told, and the next event waits with the pause.
    assert_eq!(app.deliver_fresh().await, 1);
    let ops = rx.seen().into_iter().find(|r| r.path == "/ops").expect("the operational event was delivered");
    let event: Value = serde_json::from_slice(&ops.body).unwrap();
    assert_eq!(event["type"], "herald.subscription.paused");
    assert_eq!(event["data"], json!({"subscription_id": id, "url": retired["url"], "reason": "gone"}));
    assert_eq!(listener["status"], "active");
    let second = app.publish(&key, "e2", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    assert_eq!(app.message(&key, &second).await["state"], "held");

    rx.answer(200);
    let body = json!({"status": "active"});
    let (status, _) =
        app.call(reqwest::Method::PATCH, &format!("/api/v1/subscriptions/{id}"), Some(&key), Some(body)).await;
    assert_eq!(status, 200);
    app.deliver_fresh().await;
    app.deliver_retries().await;
    for message in [&first, &second] {
        assert_eq!(app.message(&key, message).await["state"], "delivered", "resumed, {message} is delivered");
    }
}
