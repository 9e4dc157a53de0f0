//! What a subscription adds to each delivery: extra headers, credentials (bearer, basic, OAuth 2.0
//! client credentials) and the `v1a` Ed25519 signature, their secrets sealed at rest, masked in
//! the attempt's record and absent from the audit; and a pace its endpoint is sent at.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use herald::store::subscriptions;
use serde_json::{Value, json};

use crate::common::{self, ADMIN_TOKEN, TestApp, TestReceiver};

async fn subscribe(app: &TestApp, key: &str, url: String, extra: Value) -> Value {
    let mut body = json!({"name": "s", "url": url, "event_types": ["order.created"]});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    app.subscribe(key, body).await
}

async fn patch(app: &TestApp, key: &str, id: &str, body: Value) -> (u16, Value) {
    app.call(reqwest::Method::PATCH, &format!("/api/v1/subscriptions/{id}"), Some(key), Some(body)).await
}

/// The one attempt of a message that was published and delivered.
async fn attempts_of(app: &TestApp, key: &str, message_id: &str) -> Vec<Value> {
    app.message(key, message_id).await["attempts"].as_array().unwrap().clone()
}

#[tokio::test]
async fn headers_and_a_bearer_token_reach_the_receiver_sealed_at_rest_and_masked_in_the_record() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let extra = json!({"headers": {"X-Api-Key": "key-sekret-1", "X-Tenant": "t1"},
        "auth": {"kind": "bearer", "token": "tok-sekret-2"}});
    let sub = subscribe(&app, &key, rx.url.clone(), extra).await;
    let id = sub["id"].as_str().unwrap().to_string();
    assert_eq!(sub["headers"], json!({"X-Api-Key": "key-sekret-1", "X-Tenant": "t1"}), "{sub}");
    assert_eq!(sub["auth"], json!({"kind": "bearer"}), "the token is never shown: {sub}");
    let (_, list) = app.get("/api/v1/subscriptions", &key).await;
    assert_eq!(list["data"][0]["header_names"], json!(["X-Api-Key", "X-Tenant"]));
    assert!(list["data"][0].get("headers").is_none(), "a list shows only the names: {list}");

    let message = app.publish(&key, "e1", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    assert_eq!(app.deliver_fresh().await, 1);
    let seen = &rx.seen()[0];
    assert_eq!((seen.header("x-api-key"), seen.header("x-tenant")), ("key-sekret-1", "t1"));
    assert_eq!(seen.header("authorization"), "Bearer tok-sekret-2");
    let recorded = &attempts_of(&app, &key, &message).await[0]["request_headers"];
    assert_eq!((recorded["authorization"].as_str(), recorded["x-api-key"].as_str()), (Some("•••"), Some("•••")));
    assert!(recorded["webhook-signature"].as_str().unwrap().starts_with("v1,"), "the rest as sent: {recorded}");

    let row = subscriptions::get(&app.services.db, &id.as_str().into()).await.unwrap().unwrap();
    let stored = format!("{:?} {:?}", row.headers, row.auth);
    assert!(!stored.contains("sekret") && stored.contains("sealed:v1:"), "sealed at rest: {stored}");
    let changed = json!({"headers": {"X-Other": "other-sekret-3"}, "auth": {"kind": "basic", "username": "u", "password": "pw-sekret-4"}});
    assert_eq!(patch(&app, &key, &id, changed).await.0, 200);
    let (_, audit) = app.get("/api/v1/audit-log", ADMIN_TOKEN).await;
    assert!(!audit.to_string().contains("sekret"), "no secret in the audit: {audit}");
    let update = audit["data"].as_array().unwrap().iter().find(|r| r["action"] == "subscription.update").unwrap();
    assert_eq!(update["detail"]["headers"], json!(["X-Other"]));
    assert_eq!(update["detail"]["auth"], json!({"kind": "basic", "username": "u"}));

    app.publish(&key, "e2", "order.created").await;
    app.deliver_fresh().await;
    let seen = &rx.seen()[1];
    assert_eq!(seen.header("authorization"), format!("Basic {}", STANDARD.encode("u:pw-sekret-4")), "changed at once");
    assert_eq!((seen.header("x-other"), seen.header("x-api-key")), ("other-sekret-3", ""));
    let (status, cleared) = patch(&app, &key, &id, json!({"headers": null, "auth": null})).await;
    assert_eq!((status, &cleared["header_names"], &cleared["auth"]), (200, &json!([]), &Value::Null), "{cleared}");
}

#[tokio::test]
async fn bad_headers_and_credentials_are_named_and_change_nothing() {
    let app = TestApp::start_with(|s| s.allow_private_targets = false).await;
    let (_, key) = app.customer("acme").await;
    let sub = subscribe(&app, &key, "https://hooks.example/in".into(), json!({"headers": {"X-A": "1"}})).await;
    let id = sub["id"].as_str().unwrap().to_string();
    let reserved = ["host", "Content-Type", "content-length", "transfer-encoding", "connection", "user-agent"]
        .into_iter()
        .chain(["Authorization", "traceparent", "tracestate", "webhook-id", "Webhook-Anything", "ce-source"]);
    for name in reserved {
        let (status, body) = patch(&app, &key, &id, json!({"headers": {name: "v"}})).await;
        assert_eq!(status, 422, "{name}: {body}");
        assert_eq!(body["errors"][0]["field"], format!("headers.{name}"), "{body}");
    }
    let many: serde_json::Map<String, Value> = (0..21).map(|i| (format!("x-{i}"), json!("v"))).collect();
    let private =
        json!({"kind": "oauth2", "token_url": "http://10.0.0.1/token", "client_id": "c", "client_secret": "s"});
    for (body, field) in [
        (json!({"headers": many}), "headers"),
        (json!({"headers": {"x-a": "bad\u{7}value"}}), "headers.x-a"),
        (json!({"auth": private}), "auth.token_url"),
        (json!({"auth": {"kind": "digest", "token": "t"}}), "auth.kind"),
        (json!({"auth": {"kind": "bearer"}}), "auth.token"),
        (json!({"signature": "v2"}), "signature"),
        (json!({"rate_limit_per_sec": 0}), "rate_limit_per_sec"),
        (json!({"rate_limit_per_sec": 10_001}), "rate_limit_per_sec"),
    ] {
        let (status, answer) = patch(&app, &key, &id, body.clone()).await;
        assert_eq!(status, 422, "{body}: {answer}");
        assert_eq!(answer["errors"][0]["field"], field, "{answer}");
    }
    let (_, after) = app.get(&format!("/api/v1/subscriptions/{id}"), &key).await;
    assert_eq!(
        (&after["headers"], &after["auth"], &after["updated_at"]),
        (&json!({"X-A": "1"}), &Value::Null, &sub["updated_at"])
    );
}

/// A token endpoint: answers from its script (then tokens numbered by call), and counts its calls.
#[derive(Default)]
struct TokenState {
    calls: AtomicUsize,
    script: Mutex<VecDeque<(u16, Value)>>,
    client_auth: Mutex<Vec<(String, String)>>,
}

async fn token_endpoint(State(state): State<Arc<TokenState>>, headers: HeaderMap, body: String) -> impl IntoResponse {
    let call = state.calls.fetch_add(1, Ordering::SeqCst) + 1;
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    state.client_auth.lock().unwrap().push((authorization, body));
    let (status, answer) = state.script.lock().unwrap().pop_front().unwrap_or_else(|| {
        (200, json!({"access_token": format!("token-{call}"), "token_type": "Bearer", "expires_in": 3600}))
    });
    (StatusCode::from_u16(status).unwrap(), axum::Json(answer))
}

async fn start_token_endpoint() -> (String, Arc<TokenState>) {
    let state = Arc::new(TokenState::default());
    let app = axum::Router::new().fallback(token_endpoint).with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/oauth/token", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, state)
}

#[tokio::test]
async fn an_oauth2_token_serves_many_deliveries_and_is_renewed_once_after_a_401() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (token_url, tokens) = start_token_endpoint().await;
    let (_, key) = app.customer("acme").await;
    let auth = json!({"kind": "oauth2", "token_url": token_url, "client_id": "herald", "client_secret": "cs-sekret", "scope": "events"});
    let sub = subscribe(&app, &key, rx.url.clone(), json!({"auth": auth})).await;
    assert_eq!(
        sub["auth"],
        json!({"kind": "oauth2", "token_url": token_url, "client_id": "herald", "scope": "events"})
    );

    for i in 0..5 {
        app.publish(&key, &format!("e{i}"), "order.created").await;
    }
    assert_eq!(app.deliver_fresh().await, 5);
    assert_eq!(tokens.calls.load(Ordering::SeqCst), 1, "one token for five deliveries");
    assert!(rx.seen().iter().all(|r| r.header("authorization") == "Bearer token-1"));
    let (client_auth, form) = tokens.client_auth.lock().unwrap()[0].clone();
    assert_eq!(client_auth, format!("Basic {}", STANDARD.encode("herald:cs-sekret")));
    assert_eq!(form, "grant_type=client_credentials&scope=events");

    // The receiver refuses the kept token: a new one is fetched, and the attempt is the resend's.
    rx.answer(401);
    let message = app.publish(&key, "after-401", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    assert_eq!(app.deliver_fresh().await, 1);
    assert_eq!(tokens.calls.load(Ordering::SeqCst), 2);
    let last = rx.seen().pop().unwrap();
    assert_eq!(last.header("authorization"), "Bearer token-2");
    let attempts = attempts_of(&app, &key, &message).await;
    assert_eq!((attempts.len(), attempts[0]["status_code"].as_u64()), (1, Some(200)), "{attempts:?}");
    assert_eq!(attempts[0]["request_headers"]["authorization"], "•••");
}

#[tokio::test]
async fn a_token_endpoint_that_fails_is_an_auth_failure_that_is_retried() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (token_url, tokens) = start_token_endpoint().await;
    tokens.script.lock().unwrap().push_back((400, json!({"error": "invalid_client"})));
    let (_, key) = app.customer("acme").await;
    let auth = json!({"kind": "oauth2", "token_url": token_url, "client_id": "c", "client_secret": "wrong-sekret"});
    subscribe(&app, &key, rx.url.clone(), json!({"auth": auth, "retry_policy": "eventarc"})).await;
    let message = app.publish(&key, "e1", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    assert_eq!(app.deliver_fresh().await, 1);
    assert!(rx.seen().is_empty(), "nothing is sent without a token");
    let detail = app.message(&key, &message).await;
    let attempt = &detail["attempts"][0];
    assert_eq!((attempt["error_kind"].as_str(), attempt["outcome"].as_str()), (Some("auth"), Some("retryable")));
    assert!(attempt["error_detail"].as_str().unwrap().contains("400"), "{attempt}");
    assert!(!detail.to_string().contains("wrong-sekret"), "{detail}");
    assert_eq!(detail["state"], "pending");

    app.advance_secs(30.0);
    assert_eq!(app.deliver_retries().await, 1);
    assert_eq!(app.message(&key, &message).await["state"], "delivered", "the retry gets a token");
    assert_eq!(rx.seen()[0].header("authorization"), "Bearer token-2");
}

fn public_key(sub: &Value) -> VerifyingKey {
    let encoded = sub["public_key"].as_str().unwrap().strip_prefix("whpk_").expect("a whpk_ key");
    VerifyingKey::from_bytes(&STANDARD.decode(encoded).unwrap().try_into().unwrap()).unwrap()
}

/// Whether one of the request's `v1a` signatures verifies with `key`.
fn signed_by(key: &VerifyingKey, seen: &common::Seen) -> bool {
    let signed =
        [seen.header("webhook-id").as_bytes(), b".", seen.header("webhook-timestamp").as_bytes(), b".", &seen.body]
            .concat();
    seen.header("webhook-signature").split(' ').filter_map(|s| s.strip_prefix("v1a,")).any(|s| {
        let bytes: [u8; 64] = STANDARD.decode(s).unwrap().try_into().unwrap();
        key.verify(&signed, &Signature::from_bytes(&bytes)).is_ok()
    })
}

#[tokio::test]
async fn v1a_signs_with_ed25519_and_a_rotation_or_a_change_of_scheme_sends_both_for_a_day() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let sub = subscribe(&app, &key, rx.url.clone(), json!({"signature": "v1a"})).await;
    let id = sub["id"].as_str().unwrap().to_string();
    assert_eq!(sub["signature"], "v1a");
    assert!(sub.get("secret").is_none(), "the secret key never leaves Herald: {sub}");
    let first = public_key(&sub);
    app.publish(&key, "e1", "order.created").await;
    app.deliver_fresh().await;
    let seen = rx.seen().pop().unwrap();
    assert_eq!(seen.header("webhook-signature").split(' ').count(), 1);
    assert!(signed_by(&first, &seen));

    let (status, rotated) = app.post(&format!("/api/v1/subscriptions/{id}/rotate-secret"), &key, json!({})).await;
    assert_eq!(status, 200, "{rotated}");
    let second = public_key(&rotated);
    assert_ne!(first, second);
    app.publish(&key, "e2", "order.created").await;
    app.deliver_fresh().await;
    let seen = rx.seen().pop().unwrap();
    assert!(signed_by(&first, &seen) && signed_by(&second, &seen), "{}", seen.header("webhook-signature"));

    // Back to v1: a new shared secret, and the Ed25519 key signs beside it for a day.
    let (status, v1) = patch(&app, &key, &id, json!({"signature": "v1"})).await;
    assert_eq!((status, v1["signature"].as_str()), (200, Some("v1")), "{v1}");
    assert!(v1["secret"].as_str().unwrap().starts_with("whsec_") && v1.get("public_key").is_none());
    app.publish(&key, "e3", "order.created").await;
    app.deliver_fresh().await;
    let seen = rx.seen().pop().unwrap();
    let kinds: Vec<&str> = seen.header("webhook-signature").split(' ').map(|s| s.split(',').next().unwrap()).collect();
    assert_eq!(kinds, vec!["v1", "v1a"]);
    assert!(signed_by(&second, &seen));
    app.advance_secs(24.0 * 3600.0 + 1.0);
    app.publish(&key, "e4", "order.created").await;
    app.deliver_fresh().await;
    assert_eq!(rx.seen().pop().unwrap().header("webhook-signature").split(' ').count(), 1, "the old key has ended");
}

async fn messages_of(app: &TestApp, key: &str, subscription_id: &str) -> Vec<Value> {
    let (_, page) = app.get(&format!("/api/v1/messages?subscription_id={subscription_id}"), key).await;
    page["data"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_paced_endpoint_gets_its_turns_without_spending_attempts_and_holds_up_no_other() {
    let app = TestApp::start().await;
    let (paced_rx, other_rx) = (TestReceiver::start().await, TestReceiver::start().await);
    let (_, key) = app.customer("acme").await;
    let paced = subscribe(&app, &key, paced_rx.url.clone(), json!({"rate_limit_per_sec": 2})).await;
    assert_eq!(paced["rate_limit_per_sec"], 2);
    let paced_id = paced["id"].as_str().unwrap().to_string();
    subscribe(&app, &key, other_rx.url.clone(), json!({})).await;
    for i in 0..4 {
        app.publish(&key, &format!("e{i}"), "order.created").await;
    }
    app.deliver_fresh().await;
    assert_eq!((paced_rx.seen().len(), other_rx.seen().len()), (1, 4), "one turn now; the other endpoint is not held");
    let messages = messages_of(&app, &key, &paced_id).await;
    let attempts: u64 = messages.iter().map(|m| m["attempt_count"].as_u64().unwrap()).sum();
    assert_eq!(attempts, 1, "the messages beyond the pace spend no attempt: {messages:?}");

    // Half a second a turn: each tick within it finds the endpoint's turn taken.
    for (advance, delivered) in [(0.3, 1), (0.2, 2), (0.5, 3)] {
        app.advance_secs(advance);
        app.deliver_fresh().await;
        assert_eq!(paced_rx.seen().len(), delivered, "{advance} s on");
    }
    let (status, _) = patch(&app, &key, &paced_id, json!({"rate_limit_per_sec": null})).await;
    assert_eq!(status, 200);
    app.advance_secs(0.2);
    app.deliver_fresh().await;
    assert_eq!(paced_rx.seen().len(), 4, "without a pace the rest goes at once");
    assert!(
        messages_of(&app, &key, &paced_id).await.iter().all(|m| m["state"] == "delivered" && m["attempt_count"] == 1)
    );
}

#[tokio::test]
async fn a_value_that_does_not_open_leaves_the_list_readable() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    let sub = subscribe(&app, &key, "http://127.0.0.1:9/o".into(), json!({"headers": {"X-A": "1"}})).await;
    let id = sub["id"].as_str().unwrap().to_string();
    let db = &app.services.db;
    let mut row = subscriptions::get(db, &id.as_str().into()).await.unwrap().unwrap();
    row.headers = Some("sealed:v1:damaged".into());
    subscriptions::update(db, row).await.unwrap();
    let (status, list) = app.get("/api/v1/subscriptions", &key).await;
    assert_eq!((status, &list["data"][0]["id"]), (200, &json!(id)), "one damaged row does not fail the page: {list}");
    assert_eq!(list["data"][0]["header_names"], json!([]));
}
