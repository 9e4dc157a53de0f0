//! `Idempotency-Key`: a repeat answers the first answer and changes nothing, the same key with
//! another request is refused, a repeat of a running request waits, keys are the caller's own
//! and are forgotten after 24 h, and a change keeps its answer in its own transaction.

use domain::request::{ReadBody, SubscriptionBody};
use herald::service::idempotency::{self, Scope};
use herald::service::{Principal, ServiceError, subscriptions};
use herald::store::idempotency_keys::{self, Claim};
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{ADMIN_TOKEN, TestApp, TestReceiver};

/// One answer as the client sees it.
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    status: u16,
    body: String,
    replayed: bool,
}

async fn send(
    app: &TestApp,
    method: Method,
    path: &str,
    token: &str,
    key: Option<&str>,
    body: Option<Value>,
) -> Answer {
    let mut request = app.http.request(method, format!("{}{path}", app.base)).bearer_auth(token);
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request reaches the server");
    let status = response.status().as_u16();
    let replayed = response.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
    Answer { status, body: response.text().await.unwrap(), replayed }
}

async fn audit_rows(app: &TestApp) -> usize {
    let (status, audit) = app.get("/api/v1/audit-log?limit=100", ADMIN_TOKEN).await;
    assert_eq!(status, 200, "{audit}");
    audit["data"].as_array().unwrap().len()
}

async fn subscription_count(app: &TestApp, token: &str) -> usize {
    let (_, page) = app.get("/api/v1/subscriptions", token).await;
    page["data"].as_array().unwrap().len()
}

fn subscription_body(receiver: &TestReceiver) -> Value {
    json!({"name": "orders", "url": receiver.url, "event_types": ["order.created"]})
}

/// Sends the request twice with one key: the second answer is the first, marked, and writes no
/// audit row (every change writes one). The first answer.
async fn repeat(app: &TestApp, method: Method, path: &str, token: &str, body: Option<Value>) -> Answer {
    let key = format!("key-{method}-{path}");
    let first = send(app, method.clone(), path, token, Some(&key), body.clone()).await;
    assert!(!first.replayed, "{method} {path}: the first answer is not a repeat");
    let audited = audit_rows(app).await;
    let again = send(app, method.clone(), path, token, Some(&key), body).await;
    assert_eq!(again, Answer { replayed: true, ..first.clone() }, "{method} {path}");
    assert_eq!(audit_rows(app).await, audited, "{method} {path}: the repeat changed nothing");
    first
}

#[tokio::test]
async fn every_write_route_answers_a_repeat_with_its_first_answer_and_changes_nothing() {
    let app = TestApp::start().await;
    let receiver = TestReceiver::start().await;
    let customer = repeat(&app, Method::POST, "/api/v1/customers", ADMIN_TOKEN, Some(json!({"name": "acme"}))).await;
    assert_eq!(customer.status, 201);
    let customer_id = serde_json::from_str::<Value>(&customer.body).unwrap()["id"].as_str().unwrap().to_string();
    let keys = format!("/api/v1/customers/{customer_id}/api-keys");
    let key = repeat(&app, Method::POST, &keys, ADMIN_TOKEN, Some(json!({"name": "k"}))).await;
    let key: Value = serde_json::from_str(&key.body).unwrap();
    let token = key["token"].as_str().unwrap().to_string();
    let user =
        json!({"username": "ann", "password": "a long password 1", "role": "customer", "customer_id": customer_id});
    assert_eq!(repeat(&app, Method::POST, "/api/v1/users", ADMIN_TOKEN, Some(user)).await.status, 201);

    let event_type = json!({"name": "order.created", "example": {"n": 1}});
    assert_eq!(repeat(&app, Method::POST, "/api/v1/event-types", &token, Some(event_type)).await.status, 201);
    let patch = json!({"description": "An order was placed"});
    let changed = repeat(&app, Method::PATCH, "/api/v1/event-types/order.created", &token, Some(patch)).await;
    assert_eq!(changed.status, 200);

    let sub = repeat(&app, Method::POST, "/api/v1/subscriptions", &token, Some(subscription_body(&receiver))).await;
    assert_eq!(sub.status, 201);
    assert_eq!(subscription_count(&app, &token).await, 1);
    let sub_id = serde_json::from_str::<Value>(&sub.body).unwrap()["id"].as_str().unwrap().to_string();
    let sub_path = format!("/api/v1/subscriptions/{sub_id}");
    let renamed = repeat(&app, Method::PATCH, &sub_path, &token, Some(json!({"name": "renamed"}))).await;
    assert_eq!(renamed.status, 200);
    let rotated = repeat(&app, Method::POST, &format!("{sub_path}/rotate-secret"), &token, None).await;
    assert_eq!(rotated.status, 200);
    let example = json!({"event_type": "order.created"});
    let sent = repeat(&app, Method::POST, &format!("{sub_path}/send-example"), &token, Some(example)).await;
    assert_eq!(sent.status, 202);

    let event = json!({"specversion": "1.0", "id": "o-1", "source": "/shop", "type": "order.created"});
    let published = repeat(&app, Method::POST, "/api/v1/events", &token, Some(event.clone())).await;
    assert_eq!(published.status, 202);
    // The repeat answered the first answer (not a duplicate), though the event is one now.
    let published: Value = serde_json::from_str(&published.body).unwrap();
    assert_eq!(published["events"][0]["duplicate"], false);
    let (_, again) = app.post("/api/v1/events", &token, event).await;
    assert_eq!(again["events"][0]["duplicate"], true);

    app.deliver_fresh().await;
    let message_id =
        published["events"][0]["message_ids"][0].as_str().unwrap_or_else(|| panic!("{published}")).to_string();
    let replay_one = repeat(&app, Method::POST, &format!("/api/v1/messages/{message_id}/replay"), &token, None).await;
    assert_eq!(replay_one.status, 200);
    let replay_bulk =
        repeat(&app, Method::POST, "/api/v1/messages/replay", &token, Some(json!({"state": "dead"}))).await;
    assert_eq!(replay_bulk.status, 202, "{}", replay_bulk.body);
    let day = chrono::Duration::days(1);
    let (since, until) = (chrono::Utc::now() - day, chrono::Utc::now() + day);
    let window = json!({"subscription_id": sub_id, "since": since.to_rfc3339(), "until": until.to_rfc3339()});
    let replay_window = repeat(&app, Method::POST, "/api/v1/events/replay", &token, Some(window)).await;
    assert_eq!(replay_window.status, 202, "{}", replay_window.body);

    // Requests that change nothing, and refusals, are answered again too.
    let filter = json!({"filter": "message.type == 'a'", "event": {"specversion": "1.0", "id": "1", "source": "/s", "type": "a"}});
    assert_eq!(repeat(&app, Method::POST, "/api/v1/subscriptions/filter-test", &token, Some(filter)).await.status, 200);
    let missing = repeat(&app, Method::PATCH, "/api/v1/event-types/nope", &token, Some(json!({}))).await;
    assert_eq!(missing.status, 404);

    assert_eq!(repeat(&app, Method::DELETE, &sub_path, &token, None).await.status, 204);
    let removed = repeat(&app, Method::DELETE, "/api/v1/event-types/order.created", &token, None).await;
    assert_eq!(removed.status, 204);
    let key_path = format!("{keys}/{}", key["id"].as_str().unwrap());
    assert_eq!(repeat(&app, Method::DELETE, &key_path, ADMIN_TOKEN, None).await.status, 204);
}

#[tokio::test]
async fn the_same_key_with_another_request_is_refused_and_keys_are_each_callers_own() {
    let app = TestApp::start().await;
    let receiver = TestReceiver::start().await;
    let (_, acme) = app.customer("acme").await;
    let (_, globex) = app.customer("globex").await;
    let body = subscription_body(&receiver);
    let first = send(&app, Method::POST, "/api/v1/subscriptions", &acme, Some("k1"), Some(body.clone())).await;
    assert_eq!(first.status, 201);

    let mut other = body.clone();
    other["name"] = json!("other");
    for (method, path, body) in [
        (Method::POST, "/api/v1/subscriptions", Some(other)),
        (Method::POST, "/api/v1/subscriptions?customer_id=x", Some(body.clone())),
        (Method::POST, "/api/v1/subscriptions/filter-test", Some(json!({}))),
    ] {
        let refused = send(&app, method, path, &acme, Some("k1"), body).await;
        assert_eq!(refused.status, 422, "{}", refused.body);
        let problem: Value = serde_json::from_str(&refused.body).unwrap();
        assert_eq!(problem["errors"][0]["field"], "Idempotency-Key", "{problem}");
    }
    assert_eq!(subscription_count(&app, &acme).await, 1);

    // Another customer's key of the same name is its own.
    let theirs = send(&app, Method::POST, "/api/v1/subscriptions", &globex, Some("k1"), Some(body)).await;
    assert_eq!((theirs.status, theirs.replayed), (201, false));
    assert_eq!(subscription_count(&app, &globex).await, 1);
}

#[tokio::test]
async fn a_key_that_is_not_1_to_255_visible_characters_is_refused_and_nothing_is_made() {
    let app = TestApp::start().await;
    let receiver = TestReceiver::start().await;
    let (_, token) = app.customer("acme").await;
    for key in ["k".repeat(256), "two words".to_string(), String::new()] {
        let refused =
            send(&app, Method::POST, "/api/v1/subscriptions", &token, Some(&key), Some(subscription_body(&receiver)))
                .await;
        assert_eq!(refused.status, 400, "{key:?}: {}", refused.body);
        let problem: Value = serde_json::from_str(&refused.body).unwrap();
        assert_eq!(problem["errors"][0]["field"], "Idempotency-Key");
    }
    assert_eq!(subscription_count(&app, &token).await, 0);
    // Reads ignore the header.
    let (status, _) = app.get("/api/v1/subscriptions", &token).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_repeat_while_the_first_runs_waits_and_takes_over_once_its_lock_ends() {
    let app = TestApp::start().await;
    let receiver = TestReceiver::start().await;
    let (customer_id, token) = app.customer("acme").await;
    let body = subscription_body(&receiver);
    // The first request's row, as a process that is still running it (or that stopped) left it.
    let bytes = serde_json::to_vec(&body).unwrap();
    let fingerprint =
        herald::api::idempotency::fingerprint(&Method::POST, "/api/v1/subscriptions", &axum::body::Bytes::from(bytes));
    let caller = format!("customer:{customer_id}");
    let now = app.now_ms();
    let claim = Claim {
        caller: &caller,
        key: "k",
        fingerprint: &fingerprint,
        owner: 1,
        now_ms: now,
        locked_until: now + 60_000,
    };
    assert!(idempotency_keys::insert(&app.services.db, &claim).await.unwrap());

    let waiting = send(&app, Method::POST, "/api/v1/subscriptions", &token, Some("k"), Some(body.clone())).await;
    assert_eq!(waiting.status, 409, "{}", waiting.body);
    assert_eq!(subscription_count(&app, &token).await, 0);
    let response = app
        .http
        .post(format!("{}/api/v1/subscriptions", app.base))
        .bearer_auth(&token)
        .header("Idempotency-Key", "k")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["retry-after"], "1");

    // Its lock ended: the request it held committed nothing, so the repeat runs.
    app.advance_secs(61.0);
    let taken = send(&app, Method::POST, "/api/v1/subscriptions", &token, Some("k"), Some(body.clone())).await;
    assert_eq!((taken.status, taken.replayed), (201, false), "{}", taken.body);
    let again = send(&app, Method::POST, "/api/v1/subscriptions", &token, Some("k"), Some(body)).await;
    assert_eq!(again, Answer { replayed: true, ..taken });
    assert_eq!(subscription_count(&app, &token).await, 1);
}

#[tokio::test]
async fn four_concurrent_repeats_make_one_subscription() {
    let app = TestApp::start().await;
    let receiver = TestReceiver::start().await;
    let (_, token) = app.customer("acme").await;
    let body = subscription_body(&receiver);
    let one = || send(&app, Method::POST, "/api/v1/subscriptions", &token, Some("same"), Some(body.clone()));
    let answers = [one(), one(), one(), one()];
    let answers = futures::future::join_all(answers).await;
    let created: Vec<&Answer> = answers.iter().filter(|a| a.status == 201).collect();
    assert!(!created.is_empty(), "{answers:?}");
    assert!(answers.iter().all(|a| a.status == 201 || a.status == 409), "{answers:?}");
    assert!(created.iter().all(|a| a.body == created[0].body), "{answers:?}");
    assert_eq!(created.iter().filter(|a| !a.replayed).count(), 1, "{answers:?}");
    assert_eq!(subscription_count(&app, &token).await, 1);
}

#[tokio::test]
async fn a_change_keeps_its_answer_in_its_own_transaction() {
    let app = TestApp::start().await;
    let receiver = TestReceiver::start().await;
    let (customer_id, _) = app.customer("acme").await;
    let who = Principal::Customer { customer_id: customer_id.clone().into(), actor: "test".into() };
    let caller = format!("customer:{customer_id}");
    let db = &app.services.db;
    let running = |key: &'static str| Claim {
        caller: &caller,
        key,
        fingerprint: "f",
        owner: 7,
        now_ms: 0,
        locked_until: i64::MAX,
    };
    let sealer = app.services.sealer.clone();
    let scope = |key: &str, owner: i64| Scope {
        caller: caller.clone(),
        key: key.to_string(),
        owner,
        status: 201,
        sealer: sealer.clone(),
    };

    // The use case itself keeps the answer: no HTTP layer runs here.
    assert!(idempotency_keys::insert(db, &running("made")).await.unwrap());
    let body = SubscriptionBody::read(&subscription_body(&receiver)).unwrap();
    let made = idempotency::within(scope("made", 7), subscriptions::create(&app.services, &who, body)).await.unwrap();
    let kept = idempotency_keys::get(db, &caller, "made").await.unwrap().unwrap();
    assert_eq!((kept.state.as_str(), kept.status), ("done", Some(201)));
    let sealed = kept.body.unwrap();
    assert!(!sealed.contains(&made.secret.clone().unwrap()), "the kept answer holds the secret sealed: {sealed}");
    assert_eq!(scope("made", 7).open(&sealed).unwrap(), serde_json::to_string(&made).unwrap());

    // A request whose key a repeat took over cannot keep its answer, and its change is rolled back.
    assert!(idempotency_keys::insert(db, &running("taken")).await.unwrap());
    let body = SubscriptionBody::read(&subscription_body(&receiver)).unwrap();
    let lost = idempotency::within(scope("taken", 8), subscriptions::create(&app.services, &who, body)).await;
    assert!(matches!(lost, Err(ServiceError::Conflict(_))), "{:?}", lost.map(|s| s.id));
    let (_, page) = app.get("/api/v1/subscriptions", ADMIN_TOKEN).await;
    assert_eq!(page["data"].as_array().unwrap().len(), 1, "only the first subscription was made: {page}");

    // A change refused keeps no answer of its own (the HTTP layer keeps the refusal).
    assert!(idempotency_keys::insert(db, &running("failed")).await.unwrap());
    let mut bad: Value = subscription_body(&receiver);
    bad["customer_id"] = json!("no-such-customer");
    let admin = Principal::Admin { actor: "test".into() };
    let bad = SubscriptionBody::read(&bad).unwrap();
    assert!(idempotency::within(scope("failed", 7), subscriptions::create(&app.services, &admin, bad)).await.is_err());
    let kept = idempotency_keys::get(db, &caller, "failed").await.unwrap().unwrap();
    assert_eq!((kept.state.as_str(), kept.body), ("running", None));
}

#[tokio::test]
async fn keys_are_forgotten_24_hours_after_their_first_use() {
    let app = TestApp::start().await;
    let receiver = TestReceiver::start().await;
    let (customer_id, token) = app.customer("acme").await;
    let body = subscription_body(&receiver);
    let first = send(&app, Method::POST, "/api/v1/subscriptions", &token, Some("k"), Some(body.clone())).await;
    assert_eq!(first.status, 201);
    app.advance_secs(23.0 * 3600.0);
    let repeat = send(&app, Method::POST, "/api/v1/subscriptions", &token, Some("k"), Some(body.clone())).await;
    assert!(repeat.replayed);

    app.advance_secs(3601.0);
    herald::pipeline::retention::sweep(&app.services.pipeline).await.unwrap();
    let caller = format!("customer:{customer_id}");
    assert!(idempotency_keys::get(&app.services.db, &caller, "k").await.unwrap().is_none());
    let anew = send(&app, Method::POST, "/api/v1/subscriptions", &token, Some("k"), Some(body)).await;
    assert_eq!((anew.status, anew.replayed), (201, false));
    assert_eq!(subscription_count(&app, &token).await, 2);
}

#[tokio::test]
async fn an_answer_that_says_to_try_again_is_not_kept() {
    let app = TestApp::start_with(|s| {
        s.limits.publish_per_sec = 1.0;
        s.limits.publish_burst = 1;
    })
    .await;
    let (customer_id, token) = app.customer("acme").await;
    let event = |id: &str| json!({"specversion": "1.0", "id": id, "source": "/s", "type": "t"});
    let first = send(&app, Method::POST, "/api/v1/events", &token, Some("p1"), Some(event("1"))).await;
    assert_eq!(first.status, 202, "{}", first.body);
    let limited = send(&app, Method::POST, "/api/v1/events", &token, Some("p2"), Some(event("2"))).await;
    assert_eq!(limited.status, 429, "{}", limited.body);
    let caller = format!("customer:{customer_id}");
    assert!(idempotency_keys::get(&app.services.db, &caller, "p2").await.unwrap().is_none(), "the 429 is not kept");

    // Once the rate allows, the same key publishes.
    app.advance_secs(2.0);
    let again = send(&app, Method::POST, "/api/v1/events", &token, Some("p2"), Some(event("2"))).await;
    assert_eq!((again.status, again.replayed), (202, false), "{}", again.body);
}

#[tokio::test]
async fn a_server_error_is_not_kept_and_the_key_runs_again() {
    let app = TestApp::start().await;
    let receiver = TestReceiver::start().await;
    let (customer_id, token) = app.customer("acme").await;
    let mut body = subscription_body(&receiver);
    body["headers"] = json!({"X-A": "1"});
    let sub = app.subscribe(&token, body).await;
    let id = sub["id"].as_str().unwrap().to_string();
    // A stored value that no longer opens: answering the change fails with a 500.
    let db = &app.services.db;
    let mut row = herald::store::subscriptions::get(db, &id.as_str().into()).await.unwrap().unwrap();
    row.headers = Some("sealed:v1:damaged".into());
    herald::store::subscriptions::update(db, row).await.unwrap();

    let path = format!("/api/v1/subscriptions/{id}");
    let failed = send(&app, Method::PATCH, &path, &token, Some("k"), Some(json!({"name": "renamed"}))).await;
    assert_eq!(failed.status, 500, "{}", failed.body);
    let caller = format!("customer:{customer_id}");
    assert!(idempotency_keys::get(db, &caller, "k").await.unwrap().is_none(), "a 5xx is not kept");
    let (_, read) = app.get("/api/v1/subscriptions?limit=1", &token).await;
    assert_eq!(read["data"][0]["name"], "orders", "the failed change was rolled back: {read}");
    let again = send(&app, Method::PATCH, &path, &token, Some("k"), Some(json!({"name": "renamed"}))).await;
    assert_eq!((again.status, again.replayed), (500, false), "the repeat runs again: {}", again.body);
}
