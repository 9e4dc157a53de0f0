//! The REST API as a client sees it: auth rules, isolation, validation,
//! idempotent publishing and the retry-policy preview.

use crate::common;

use common::{ADMIN_TOKEN, TestApp};
use reqwest::Method;
use serde_json::{Value, json};

fn fields(problem: &Value) -> Vec<String> {
    problem["errors"]
        .as_array()
        .map(|e| e.iter().map(|f| f["field"].as_str().unwrap_or("").to_string()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn tokens_decide_who_may_do_what() {
    let app = TestApp::start().await;
    let (_, key_a) = app.customer("acme").await;
    assert_eq!(app.call(Method::GET, "/api/v1/subscriptions", None, None).await.0, 401);
    assert_eq!(app.get("/api/v1/subscriptions", "hk_not-a-key").await.0, 401);
    assert_eq!(app.get("/api/v1/subscriptions", "").await.0, 401);
    let (status, problem) = app.post("/api/v1/customers", &key_a, json!({"name": "x"})).await;
    assert_eq!((status, problem["status"].as_u64()), (403, Some(403)));
    assert_eq!(app.get("/api/v1/users", &key_a).await.0, 405, "no route lists users");
    assert_eq!(app.post("/api/v1/users", &key_a, json!({})).await.0, 403);
    assert_eq!(app.get("/api/v1/customers", ADMIN_TOKEN).await.0, 200);
    assert_eq!(app.get("/healthz", "").await.0, 200);
}

#[tokio::test]
async fn a_customer_never_sees_another_customers_objects() {
    let app = TestApp::start().await;
    let (_, key_a) = app.customer("acme").await;
    let (_, key_b) = app.customer("globex").await;
    let sub = app.subscribe(&key_a, json!({"name": "s", "url": "http://127.0.0.1:9/x", "event_types": ["*"]})).await;
    let published = app.publish(&key_a, "e1", "order.created").await;
    let msg_id = published["message_ids"][0].as_str().unwrap();
    let sub_id = sub["id"].as_str().unwrap();

    for path in [format!("/api/v1/subscriptions/{sub_id}"), format!("/api/v1/messages/{msg_id}")] {
        assert_eq!(app.get(&path, &key_b).await.0, 404, "{path}");
        assert_eq!(app.get(&path, &key_a).await.0, 200, "{path}");
    }
    let (status, _) = app
        .call(Method::PATCH, &format!("/api/v1/subscriptions/{sub_id}"), Some(&key_b), Some(json!({"name": "stolen"})))
        .await;
    assert_eq!(status, 404);
    assert_eq!(app.call(Method::DELETE, &format!("/api/v1/subscriptions/{sub_id}"), Some(&key_b), None).await.0, 404);
    assert_eq!(app.post(&format!("/api/v1/messages/{msg_id}/replay"), &key_b, json!({})).await.0, 404);
    for list in ["/api/v1/subscriptions", "/api/v1/messages", "/api/v1/endpoints"] {
        let (status, page) = app.get(list, &key_b).await;
        assert_eq!((status, page["data"].as_array().map(Vec::len)), (200, Some(0)), "{list}");
        assert_eq!(app.get(list, &key_a).await.1["data"].as_array().map(Vec::len), Some(1), "{list}");
    }
    assert_eq!(app.get(&format!("/api/v1/subscriptions/{sub_id}"), &key_a).await.1["name"], "s");
}

#[tokio::test]
async fn invalid_input_is_a_problem_naming_the_field() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    let cases = [
        (json!({"name": "s", "url": "ftp://example.com/x", "event_types": ["a"]}), "url"),
        (json!({"name": "s", "url": "http://example.com/x"}), "event_types"),
        (
            json!({"name": "s", "url": "http://example.com/x", "event_types": ["a"],
                   "retry_policy": {"kind": "exponential", "min_delay_secs": 10, "max_delay_secs": 5}}),
            "retry_policy.min_delay_secs",
        ),
        (json!({"name": "s", "url": "http://example.com/x", "event_types": ["a"], "timeout_ms": 10}), "timeout_ms"),
        (json!({"name": "s\u{0}", "url": "http://example.com/x", "event_types": ["a"]}), "name"),
        (json!({"name": "s", "url": "http://example.com/x", "event_types": ["a"], "colour": 1}), "colour"),
    ];
    for (body, field) in cases {
        let resp = app
            .http
            .post(format!("{}/api/v1/subscriptions", app.base))
            .bearer_auth(&key)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        assert_eq!(resp.headers()["content-type"], "application/problem+json");
        let problem: Value = resp.json().await.unwrap();
        assert!((400..500).contains(&status), "{body}: {status}");
        assert!(fields(&problem).iter().any(|f| f == field), "{field} not in {problem}");
    }
    let resp = app
        .http
        .post(format!("{}/api/v1/events", app.base))
        .bearer_auth(&key)
        .header("content-type", "application/cloudevents+json")
        .body(r#"{"specversion":"1.0","id":"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    assert_eq!(resp.headers()["content-type"], "application/problem+json");
    assert_eq!(fields(&resp.json().await.unwrap()), vec!["body"]);

    let (status, problem) =
        app.post("/api/v1/events", &key, json!({"specversion": "1.0", "source": "/s", "type": "t"})).await;
    assert_eq!((status, fields(&problem)), (422, vec!["id".to_string()]));
    let (status, problem) = app.get("/api/v1/messages?limit=0", &key).await;
    assert_eq!((status, fields(&problem)), (422, vec!["limit".to_string()]));
    let (status, problem) = app.get("/api/v1/messages?cursor=nonsense", &key).await;
    assert_eq!((status, fields(&problem)), (422, vec!["cursor".to_string()]));
    let (status, problem) = app.get("/api/v1/messages?state=lost", &key).await;
    assert_eq!((status, fields(&problem)), (422, vec!["state".to_string()]));
}

#[tokio::test]
async fn literal_private_targets_are_refused_unless_allowed() {
    let app = TestApp::start_with(|s| s.allow_private_targets = false).await;
    let (_, key) = app.customer("acme").await;
    for url in [
        "http://127.0.0.1/x",
        "http://2130706433/",
        "http://[::1]:8080/",
        "http://169.254.169.254/latest",
        "http://10.1.2.3/",
    ] {
        let (status, problem) =
            app.post("/api/v1/subscriptions", &key, json!({"name": "s", "url": url, "event_types": ["a"]})).await;
        assert_eq!((status, fields(&problem)), (422, vec!["url".to_string()]), "{url}");
    }
}

#[tokio::test]
async fn republishing_an_event_is_a_duplicate_with_the_same_messages() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "a", "url": "http://127.0.0.1:9/a", "event_types": ["order.created"]})).await;
    app.subscribe(&key, json!({"name": "b", "url": "http://127.0.0.1:9/b", "event_types": ["*"]})).await;
    let first = app.publish(&key, "e1", "order.created").await;
    assert_eq!((first["duplicate"].as_bool(), first["message_ids"].as_array().unwrap().len()), (Some(false), 2));
    let again = app.publish(&key, "e1", "order.created").await;
    assert_eq!(again["duplicate"], true);
    assert_eq!(again["message_ids"], first["message_ids"]);
    let other = app.publish(&key, "e2", "order.deleted").await;
    assert_eq!(other["message_ids"].as_array().unwrap().len(), 1);

    let batch = json!([
        {"specversion": "1.0", "id": "e1", "source": "/test", "type": "order.created"},
        {"specversion": "1.0", "id": "e3", "source": "/test", "type": "order.created"}
    ]);
    let resp = app
        .http
        .post(format!("{}/api/v1/events", app.base))
        .bearer_auth(&key)
        .header("content-type", "application/cloudevents-batch+json")
        .body(batch.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    let answer: Value = resp.json().await.unwrap();
    let dupes: Vec<bool> =
        answer["events"].as_array().unwrap().iter().map(|e| e["duplicate"].as_bool().unwrap()).collect();
    assert_eq!(dupes, vec![true, false]);
    let (_, page) = app.get("/api/v1/messages?limit=1000", &key).await;
    assert_eq!(page["data"].as_array().unwrap().len(), 5);
}

#[tokio::test]
async fn lists_page_newest_first_with_a_cursor() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "a", "url": "http://127.0.0.1:9/a", "event_types": ["*"]})).await;
    let mut published = Vec::new();
    for i in 0..5 {
        published.push(app.publish(&key, &format!("e{i}"), "t").await["message_ids"][0].as_str().unwrap().to_string());
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/v1/messages?limit=2&cursor={c}"),
            None => "/api/v1/messages?limit=2".into(),
        };
        let (_, page) = app.get(&path, &key).await;
        seen.extend(page["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_string()));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    published.reverse();
    assert_eq!(seen, published);
}

#[tokio::test]
async fn the_preview_answers_the_presets_numbers() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    let offsets = |preview: &Value| -> Vec<f64> {
        preview["attempts"].as_array().unwrap().iter().map(|a| a["offset_secs"].as_f64().unwrap()).collect()
    };
    let (status, wf) = app.post("/api/v1/retry-policies/preview", &key, json!({"retry_policy": "workfront"})).await;
    assert_eq!(status, 200, "{wf}");
    let wf = offsets(&wf);
    assert_eq!(wf.len(), 12);
    assert_eq!(&wf[..3], &[0.0, 84.8, 254.4]);
    assert_eq!(wf[11], 173585.6);
    let (_, ea) = app.post("/api/v1/retry-policies/preview", &key, json!({"retry_policy": {"kind": "eventarc"}})).await;
    assert_eq!(offsets(&ea), vec![0.0, 1.0, 3.0, 7.0, 15.0]);
    let (_, eg) = app.post("/api/v1/retry-policies/preview", &key, json!({"retry_policy": "event-grid"})).await;
    let eg = offsets(&eg);
    assert_eq!(&eg[..9], &[0.0, 10.0, 40.0, 100.0, 400.0, 1000.0, 2800.0, 6400.0, 10000.0]);
    assert_eq!(eg.len(), 30);
    assert!(eg[29] <= 86400.0);
    let linear =
        json!({"retry_policy": {"kind": "exponential", "min_delay_secs": 5, "max_delay_secs": 5, "max_attempts": 4}});
    let (_, lin) = app.post("/api/v1/retry-policies/preview", &key, linear).await;
    assert_eq!(offsets(&lin), vec![0.0, 5.0, 10.0, 15.0]);
}

#[tokio::test]
async fn the_openapi_document_describes_every_route() {
    let app = TestApp::start().await;
    let (status, doc) = app.call(Method::GET, "/api/openapi.json", None, None).await;
    assert_eq!(status, 200);
    let paths = doc["paths"].as_object().unwrap();
    for path in [
        "/healthz",
        "/metrics",
        "/api/v1/customers",
        "/api/v1/customers/{id}/api-keys",
        "/api/v1/customers/{id}/api-keys/{key_id}",
        "/api/v1/users",
        "/api/v1/subscriptions",
        "/api/v1/subscriptions/{id}",
        "/api/v1/subscriptions/{id}/rotate-secret",
        "/api/v1/events",
        "/api/v1/messages",
        "/api/v1/messages/{id}",
        "/api/v1/messages/{id}/replay",
        "/api/v1/messages/replay",
        "/api/v1/endpoints",
        "/api/v1/endpoints/{id}/unlock",
        "/api/v1/retry-policies/preview",
        "/api/v1/audit-log",
    ] {
        assert!(paths.contains_key(path), "{path} missing from the OpenAPI document");
    }
    // Every reference resolves, whichever body declares it (those read by their rules included).
    fn refs(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(object) => {
                if let Some(Value::String(target)) = object.get("$ref") {
                    found.push(target.clone());
                }
                object.values().for_each(|v| refs(v, found));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    refs(&doc, &mut found);
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for target in &found {
        let name = target.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("{target}"));
        assert!(schemas.contains_key(name), "{target} is referred to but not in the document");
    }
    for body in [
        "NameBody",
        "PreviewBody",
        "RetryPolicy",
        "SubscriptionBody",
        "SubscriptionPatch",
        "BulkReplayBody",
        "ReplayWindowBody",
        "UserBody",
    ] {
        assert!(found.contains(&format!("#/components/schemas/{body}")), "{body} is not referred to");
    }
    let name = &schemas["NameBody"]["properties"]["name"];
    assert_eq!((name["maxLength"].as_u64(), name["minLength"].as_u64()), (Some(200), Some(1)));
}

#[tokio::test]
async fn the_admin_creates_dashboard_users() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("acme").await;
    let body = json!({"username": "alice", "password": "alice-password", "role": "customer", "customer_id": customer});
    let (status, user) = app.post("/api/v1/users", ADMIN_TOKEN, body.clone()).await;
    assert_eq!((status, user["role"].as_str()), (201, Some("customer")));
    let (status, problem) = app.post("/api/v1/users", ADMIN_TOKEN, body).await;
    assert_eq!((status, fields(&problem)), (422, vec!["username".to_string()]));
    let (status, problem) = app
        .post("/api/v1/users", ADMIN_TOKEN, json!({"username": "bob", "password": "bob-password", "role": "customer"}))
        .await;
    assert_eq!((status, fields(&problem)), (422, vec!["customer_id".to_string()]));
}

#[tokio::test]
async fn a_large_batch_fanning_out_to_many_subscriptions_is_accepted_whole() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    for i in 0..16 {
        app.subscribe(
            &key,
            json!({"name": format!("s{i}"), "url": format!("http://127.0.0.1:9/{i}"), "event_types": ["*"]}),
        )
        .await;
    }
    assert_eq!(app.publish_batch(&key, 200).await, 202, "3200 messages in one publish");
    let (_, page) = app.get("/api/v1/messages?limit=1000", &key).await;
    assert_eq!(page["data"].as_array().unwrap().len(), 1000);
}

#[tokio::test]
async fn api_keys_are_listed_without_tokens_and_a_revoked_key_fails_at_its_next_request() {
    let app = TestApp::start().await;
    let (id, key) = app.customer("acme").await;
    let (other_id, other_key) = app.customer("globex").await;
    assert_eq!(app.get("/api/v1/subscriptions", &key).await.0, 200, "the key works, and is cached");

    let keys = format!("/api/v1/customers/{id}/api-keys");
    let (status, page) = app.get(&keys, ADMIN_TOKEN).await;
    assert_eq!(status, 200, "{page}");
    let listed = page["data"].as_array().unwrap();
    assert_eq!((listed.len(), listed[0]["name"].as_str()), (1, Some("k")), "{page}");
    assert!(listed[0].get("token").is_none() && !page.to_string().contains(&key), "never the token: {page}");
    let key_id = listed[0]["id"].as_str().unwrap().to_string();
    assert_eq!(app.get(&keys, &key).await.0, 200, "a customer lists its own keys");
    assert_eq!(app.get(&keys, &other_key).await.0, 404, "but not another's");

    let delete = |path: String, token: String| {
        let app = &app;
        async move { app.call(reqwest::Method::DELETE, &path, Some(&token), None).await.0 }
    };
    let revoke = format!("{keys}/{key_id}");
    assert_eq!(delete(revoke.clone(), other_key.clone()).await, 404);
    assert_eq!(delete(format!("/api/v1/customers/{other_id}/api-keys/{key_id}"), ADMIN_TOKEN.into()).await, 404);
    assert_eq!(app.get("/api/v1/subscriptions", &key).await.0, 200, "refused revocations change nothing");
    assert_eq!(delete(revoke.clone(), ADMIN_TOKEN.into()).await, 204);
    assert_eq!(app.get("/api/v1/subscriptions", &key).await.0, 401, "the very next request fails");
    assert_eq!(app.get(&keys, ADMIN_TOKEN).await.1["data"], json!([]));
    assert_eq!(delete(revoke, ADMIN_TOKEN.into()).await, 404, "revoked once");
    let (_, audit) = app.get("/api/v1/audit-log", ADMIN_TOKEN).await;
    let row = &audit["data"][0];
    assert_eq!((row["action"].as_str(), row["target"].as_str()), (Some("api_key.revoke"), Some(key_id.as_str())));
}

#[tokio::test]
async fn every_change_writes_one_audit_row_and_a_customer_reads_its_own() {
    let app = TestApp::start().await;
    let rx = common::TestReceiver::start().await;
    let (acme, key) = app.customer("acme").await;
    let (globex, globex_key) = app.customer("globex").await;
    let user = json!({"username": "alice", "password": "password-123", "role": "customer", "customer_id": acme});
    assert_eq!(app.post("/api/v1/users", ADMIN_TOKEN, user).await.0, 201);
    let policy = json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 1});
    let sub =
        app.subscribe(&key, json!({"name": "s", "url": rx.url, "event_types": ["*"], "retry_policy": policy})).await;
    let sub_id = sub["id"].as_str().unwrap().to_string();
    let path = format!("/api/v1/subscriptions/{sub_id}");
    assert_eq!(app.call(Method::PATCH, &path, Some(&key), Some(json!({"name": "renamed"}))).await.0, 200);
    let (_, rotated) = app.post(&format!("{path}/rotate-secret"), &key, json!({})).await;
    rx.answer(500);
    rx.answer(500);
    let msg = app.publish(&key, "e1", "t").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    assert_eq!(app.post(&format!("/api/v1/messages/{msg}/replay"), &key, json!({})).await.0, 200);
    app.deliver_fresh().await;
    app.deliver_retries().await;
    assert_eq!(app.post("/api/v1/messages/replay", &key, json!({"state": "dead"})).await.1["replayed"], 1);
    assert_eq!(app.call(Method::DELETE, &path, Some(&key), None).await.0, 204);

    let actions = |page: &Value| -> Vec<String> {
        page["data"].as_array().unwrap().iter().map(|row| row["action"].as_str().unwrap().to_string()).collect()
    };
    let expected = [
        "subscription.delete",
        "messages.replay",
        "message.replay",
        "subscription.rotate_secret",
        "subscription.update",
        "subscription.create",
        "user.create",
        "api_key.create",
        "customer.create",
    ];
    let (status, admin_view) = app.get(&format!("/api/v1/audit-log?customer_id={acme}"), ADMIN_TOKEN).await;
    assert_eq!((status, actions(&admin_view)), (200, expected.map(String::from).to_vec()), "{admin_view}");
    let (_, own) = app.get("/api/v1/audit-log", &key).await;
    assert_eq!(actions(&own), actions(&admin_view), "a customer's key reads its own rows");
    let (_, not_theirs) = app.get(&format!("/api/v1/audit-log?customer_id={globex}"), &key).await;
    assert_eq!(actions(&not_theirs), actions(&admin_view), "and only its own");
    assert_eq!(actions(&app.get("/api/v1/audit-log", &globex_key).await.1), ["api_key.create", "customer.create"]);
    assert!(!own.to_string().contains(rotated["secret"].as_str().unwrap()), "never a secret");
    assert!(own["data"].as_array().unwrap().iter().all(|row| row["actor"] != "system"));

    let (_, updates) = app.get("/api/v1/audit-log?action=subscription.update", &key).await;
    assert_eq!((actions(&updates).len(), &updates["data"][0]["detail"]["name"]), (1, &json!("renamed")));
    let (_, about) = app.get(&format!("/api/v1/audit-log?object_id={sub_id}"), &key).await;
    assert_eq!(actions(&about).len(), 4, "{about}");
    assert_eq!(actions(&app.get("/api/v1/audit-log?since=2999-01-01T00:00:00Z", &key).await.1).len(), 0);
    assert_eq!(actions(&app.get("/api/v1/audit-log?until=2000-01-01T00:00:00Z", &key).await.1).len(), 0);
    let (status, problem) = app.get("/api/v1/audit-log?since=yesterday", &key).await;
    assert_eq!((status, problem["errors"][0]["field"].as_str()), (422, Some("since")), "{problem}");
}

fn ids_of(page: &Value) -> Vec<&str> {
    page["data"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap()).collect()
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).unwrap().to_rfc3339()
}

async fn publish_from(app: &TestApp, key: &str, id: &str, source: &str, event_type: &str) {
    let event = json!({"specversion": "1.0", "id": id, "source": source, "type": event_type, "data": {"n": id}});
    let (status, body) = app.post("/api/v1/events", key, event).await;
    assert_eq!(status, 202, "{body}");
}

/// e1 (`/shop`, type a), e2 (`/shop`, b) 10 s later and e3 (`/other`, a) 10 s after that; returns e1's time.
async fn publish_three(app: &TestApp, key: &str) -> i64 {
    let t0 = app.now_ms();
    publish_from(app, key, "e1", "/shop", "a").await;
    app.advance_secs(10.0);
    publish_from(app, key, "e2", "/shop", "b").await;
    app.advance_secs(10.0);
    publish_from(app, key, "e3", "/other", "a").await;
    t0
}

#[tokio::test]
async fn the_archive_lists_and_finds_kept_events_by_filter_and_id() {
    let app = TestApp::start().await;
    let (a_id, key) = app.customer("acme").await;
    let (_, other) = app.customer("globex").await;
    let t0 = publish_three(&app, &key).await;

    let list = |query: String| {
        let app = &app;
        let key = key.clone();
        async move {
            let (status, page) = app.get(&format!("/api/v1/events{query}"), &key).await;
            assert_eq!(status, 200, "{query}: {page}");
            page
        }
    };
    assert_eq!(ids_of(&list(String::new()).await), ["e3", "e2", "e1"], "newest first");
    assert_eq!(ids_of(&list("?type=a".into()).await), ["e3", "e1"]);
    assert_eq!(ids_of(&list("?source=/shop".into()).await), ["e2", "e1"]);
    let window = format!("?since={}&until={}", rfc3339(t0 + 5_000), rfc3339(t0 + 15_000));
    assert_eq!(ids_of(&list(window.replace('+', "%2B")).await), ["e2"]);
    let first = list("?limit=2".into()).await;
    let cursor = first["next_cursor"].as_str().unwrap();
    assert_eq!(ids_of(&list(format!("?limit=2&cursor={cursor}")).await), ["e1"]);
    let (_, theirs) = app.get("/api/v1/events", &other).await;
    assert!(ids_of(&theirs).is_empty(), "another customer's archive is its own");

    let (status, e2) = app.get("/api/v1/events/e2", &key).await;
    assert_eq!((status, e2["event"]["data"]["n"].as_str(), e2["type"].as_str()), (200, Some("e2"), Some("b")), "{e2}");
    assert_eq!(app.get("/api/v1/events/e2", &other).await.0, 404);
    let (status, problem) = app.get("/api/v1/events/e2", ADMIN_TOKEN).await;
    assert_eq!((status, fields(&problem)), (422, vec!["customer_id".to_string()]));
    assert_eq!(app.get(&format!("/api/v1/events/e2?customer_id={a_id}"), ADMIN_TOKEN).await.0, 200);

    publish_from(&app, &key, "twin", "/x", "a").await;
    publish_from(&app, &key, "twin", "/y", "a").await;
    let (status, problem) = app.get("/api/v1/events/twin", &key).await;
    assert_eq!(status, 409, "two kept events have the id, and no source says which: {problem}");
    let (status, twin) = app.get("/api/v1/events/twin?source=/y", &key).await;
    assert_eq!((status, twin["source"].as_str()), (200, Some("/y")));
    let empty = format!("/api/v1/events?since={}&until={}", rfc3339(t0), rfc3339(t0)).replace('+', "%2B");
    let (status, problem) = app.get(&empty, &key).await;
    assert_eq!((status, fields(&problem)), (422, vec!["until".to_string()]));
}

#[tokio::test]
async fn a_window_of_the_archive_is_replayed_to_a_subscription_made_after_it() {
    let app = TestApp::start().await;
    let rx = common::TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let (_, other) = app.customer("globex").await;
    let t0 = publish_three(&app, &key).await;
    publish_from(&app, &key, "e4", "/other", "c").await;
    let late = app.subscribe(&key, json!({"name": "late", "url": rx.url, "event_types": ["a", "b"]})).await;
    let sub_id = late["id"].as_str().unwrap();
    let theirs = app.subscribe(&other, json!({"name": "x", "url": rx.url, "event_types": ["*"]})).await;

    let whole = |extra: Value| {
        let mut body = json!({"since": rfc3339(t0 - 1000), "until": rfc3339(t0 + 60_000), "subscription_id": sub_id});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    for (body, field) in [
        (json!({"since": rfc3339(t0), "until": rfc3339(t0), "subscription_id": sub_id}), "until"),
        (json!({"since": rfc3339(t0), "until": rfc3339(t0 + 367 * 86_400_000), "subscription_id": sub_id}), "until"),
        (whole(json!({"colour": "red"})), "colour"),
        (whole(json!({"event_types": []})), "event_types"),
        (json!({"until": rfc3339(t0), "subscription_id": sub_id}), "since"),
        (whole(json!({"since": "yesterday"})), "since"),
    ] {
        let (status, problem) = app.post("/api/v1/events/replay", &key, body.clone()).await;
        assert_eq!((status, fields(&problem)), (422, vec![field.to_string()]), "{body}: {problem}");
    }
    for unseen in [theirs["id"].clone(), json!("sub_nope")] {
        let (status, problem) =
            app.post("/api/v1/events/replay", &key, whole(json!({"subscription_id": unseen}))).await;
        assert_eq!((status, fields(&problem)), (404, vec!["subscription_id".to_string()]), "{problem}");
    }
    let (_, log) = app.get(&format!("/api/v1/messages?subscription_id={sub_id}"), &key).await;
    assert!(ids_of(&log).is_empty(), "a refused replay changes nothing");

    let window = json!({"since": rfc3339(t0 - 1000), "until": rfc3339(t0 + 15_000), "subscription_id": sub_id});
    let (status, replayed) = app.post("/api/v1/events/replay", &key, window).await;
    assert_eq!((status, &replayed["replayed"]), (202, &json!(2)), "e1 and e2 are in the window: {replayed}");
    let (_, narrowed) =
        app.post("/api/v1/events/replay", &key, whole(json!({"event_types": ["a"], "source": "/other"}))).await;
    assert_eq!(narrowed["replayed"], 1, "only e3: {narrowed}");
    assert_eq!(app.deliver_fresh().await, 3);
    let mut got: Vec<String> = rx
        .seen()
        .iter()
        .map(|seen| serde_json::from_slice::<Value>(&seen.body).unwrap()["id"].as_str().unwrap().to_string())
        .collect();
    got.sort();
    assert_eq!(got, ["e1", "e2", "e3"]);
    let (_, e1) = app.get("/api/v1/events/e1", &key).await;
    assert_eq!(e1["message_ids"].as_array().unwrap().len(), 1, "the replay's message is the event's: {e1}");
    let (status, of_e1) = app.get("/api/v1/messages?event_id=e1", &key).await;
    assert_eq!((status, ids_of(&of_e1)), (200, vec![e1["message_ids"][0].as_str().unwrap()]), "{of_e1}");
    assert!(ids_of(&app.get("/api/v1/messages?event_id=nope", &key).await.1).is_empty());
    assert!(
        ids_of(&app.get("/api/v1/messages?event_id=e1", &other).await.1).is_empty(),
        "another's event is not found"
    );
    let (status, problem) = app.get("/api/v1/messages?event_id=e1", ADMIN_TOKEN).await;
    assert_eq!((status, fields(&problem)), (422, vec!["customer_id".to_string()]));
    let (_, audit) = app.get("/api/v1/audit-log?action=events.replay", &key).await;
    let rows = audit["data"].as_array().unwrap();
    assert_eq!((rows.len(), &rows[0]["target"], &rows[0]["detail"]["replayed"]), (2, &json!(sub_id), &json!(1)));
}

#[tokio::test]
async fn events_are_read_as_the_cloudevents_json_format_says() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "all", "url": "http://127.0.0.1:9/a", "event_types": ["*"]})).await;

    // An empty batch is valid: nothing stored.
    let resp = app
        .http
        .post(format!("{}/api/v1/events", app.base))
        .bearer_auth(&key)
        .header("content-type", "application/cloudevents-batch+json")
        .body("[]")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    assert_eq!(resp.json::<Value>().await.unwrap(), json!({"events": []}));
    let (_, page) = app.get("/api/v1/events", &key).await;
    assert_eq!(page["data"], json!([]), "an empty batch stores nothing");

    // A null optional attribute, or extension, is absent: neither kept nor sent.
    let event = json!({"specversion": "1.0", "id": "n1", "source": "/test", "type": "t", "subject": null,
        "time": null, "datacontenttype": null, "partitionkey": null, "data": {"a": 1}});
    let (status, body) = app.post("/api/v1/events", &key, event).await;
    assert_eq!(status, 202, "{body}");
    let (status, found) = app.get("/api/v1/events/n1", &key).await;
    assert_eq!(status, 200, "{found}");
    let kept = found["event"].as_object().unwrap();
    let names: Vec<&str> = kept.keys().map(String::as_str).collect();
    assert_eq!(names, ["data", "id", "source", "specversion", "type"], "{found}");

    // A datacontenttype must be a media type; nothing of the refused event is stored.
    for (media_type, ok) in [
        ("application/json", true),
        ("text/plain; charset=\"utf-8\"", true),
        ("application/vnd.acme+json;v=2", true),
        ("json", false),
        ("text/", false),
        ("text/plain; charset", false),
        ("text/plain; a=\"unclosed", false),
    ] {
        let id = format!("m-{media_type}");
        let event = json!({"specversion": "1.0", "id": id, "source": "/m", "type": "t", "datacontenttype": media_type});
        let (status, body) = app.post("/api/v1/events", &key, event).await;
        if ok {
            assert_eq!(status, 202, "{media_type}: {body}");
        } else {
            assert_eq!(status, 422, "{media_type}: {body}");
            assert_eq!(body["errors"][0]["field"], "datacontenttype", "{media_type}: {body}");
            let (status, _) = app.get(&format!("/api/v1/events/{}?source=/m", urlencoding(&id)), &key).await;
            assert_eq!(status, 404, "{media_type} was not stored");
        }
    }
}

/// A path segment with its reserved characters percent-encoded.
fn urlencoding(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
