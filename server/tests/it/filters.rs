//! Subscription filters: an event reaches a subscription only when its CEL
//! filter is true for it; bad filters are refused naming `filter`; a change
//! routes the next publish; a filter that fails on an event does not match it
//! and is counted; `filter-test` tries one and stores nothing.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{ADMIN_TOKEN, TestApp};

fn event(id: &str, extra: Value) -> Value {
    let mut event = json!({"specversion": "1.0", "id": id, "source": "/shop/eu/1", "type": "order.created"});
    event.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    event
}

/// How many messages the event got.
async fn routed(app: &TestApp, key: &str, event: Value) -> usize {
    let (status, body) = app.post("/api/v1/events", key, event).await;
    assert_eq!(status, 202, "{body}");
    body["events"][0]["message_ids"].as_array().unwrap().len()
}

fn fields(problem: &Value) -> Vec<String> {
    problem["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap().to_string()).collect()
}

async fn patch(app: &TestApp, key: &str, id: &str, body: Value) -> (u16, Value) {
    app.call(Method::PATCH, &format!("/api/v1/subscriptions/{id}"), Some(key), Some(body)).await
}

async fn filter_errors(app: &TestApp) -> f64 {
    let text = reqwest::get(format!("{}/metrics", app.base)).await.unwrap().text().await.unwrap();
    text.lines().find_map(|l| l.strip_prefix("herald_filter_errors_total ")).map_or(0.0, |v| v.parse().unwrap())
}

#[tokio::test]
async fn only_events_the_filter_accepts_get_a_message() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    let filter = r#"message.source.startsWith("/shop/eu") && message.data.total > 100"#;
    let sub = app
        .subscribe(
            &key,
            json!({"name": "eu", "url": "http://127.0.0.1:9/x", "event_types": ["order.created"], "filter": filter}),
        )
        .await;
    assert_eq!(sub["filter"], filter);
    let (_, read) = app.get(&format!("/api/v1/subscriptions/{}", sub["id"].as_str().unwrap()), &key).await;
    assert_eq!(read["filter"], filter, "the filter is stored");

    assert_eq!(routed(&app, &key, event("big", json!({"data": {"total": 150}}))).await, 1);
    assert_eq!(routed(&app, &key, event("small", json!({"data": {"total": 50}}))).await, 0);
    let us = json!({"source": "/shop/us/1", "data": {"total": 500}});
    assert_eq!(routed(&app, &key, event("us", us)).await, 0, "the source does not match");
    let before = filter_errors(&app).await;
    assert_eq!(routed(&app, &key, event("no-total", json!({"data": {"count": 1}}))).await, 0, "a missing key");
    assert_eq!(routed(&app, &key, event("text-total", json!({"data": {"total": "many"}}))).await, 0, "a mismatch");
    assert!(filter_errors(&app).await >= before + 2.0, "both run-time errors are counted");
}

#[tokio::test]
async fn a_changed_filter_routes_the_next_publish_and_null_removes_it() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    let body =
        json!({"name": "s", "url": "http://127.0.0.1:9/x", "event_types": ["*"], "filter": "message.tenant == \"eu\""});
    let id = app.subscribe(&key, body).await["id"].as_str().unwrap().to_string();
    assert_eq!(routed(&app, &key, event("e1", json!({"tenant": "eu"}))).await, 1);
    assert_eq!(routed(&app, &key, event("e2", json!({"tenant": "us"}))).await, 0);

    let (status, changed) = patch(&app, &key, &id, json!({"filter": "message.tenant == \"us\""})).await;
    assert_eq!(status, 200, "{changed}");
    assert_eq!(routed(&app, &key, event("e3", json!({"tenant": "eu"}))).await, 0, "the kept routing was dropped");
    assert_eq!(routed(&app, &key, event("e4", json!({"tenant": "us"}))).await, 1);

    let (status, kept) = patch(&app, &key, &id, json!({"name": "renamed"})).await;
    assert_eq!((status, &kept["filter"]), (200, &json!("message.tenant == \"us\"")), "left out, it stays");
    let (status, cleared) = patch(&app, &key, &id, json!({"filter": null})).await;
    assert_eq!((status, &cleared["filter"]), (200, &Value::Null), "{cleared}");
    assert_eq!(routed(&app, &key, event("e5", json!({"tenant": "eu"}))).await, 1, "no filter: every event");
}

#[tokio::test]
async fn a_bad_filter_is_refused_naming_the_field_and_changes_nothing() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    let good = "has(message.subject)";
    let base = json!({"name": "s", "url": "http://127.0.0.1:9/x", "event_types": ["*"]});
    let id = app
        .subscribe(&key, json!({"name": "s", "url": "http://127.0.0.1:9/x", "event_types": ["*"], "filter": good}))
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let too_long = format!("message.id == \"{}\"", "x".repeat(4096));
    for (filter, says) in [
        (json!("message.source =="), "does not parse"),
        (json!("1 + 2"), "boolean"),
        (json!("event.type == \"x\""), "`event`"),
        (json!(too_long), "4096"),
        (json!(" "), "blank"),
        (json!(42), "string"),
    ] {
        let mut create = base.clone();
        create["filter"] = filter.clone();
        let (status, problem) = app.post("/api/v1/subscriptions", &key, create).await;
        assert_eq!((status, fields(&problem)), (422, vec!["filter".to_string()]), "{filter}: {problem}");
        assert!(problem["errors"][0]["message"].as_str().unwrap().contains(says), "{filter}: {problem}");
        let (status, problem) = patch(&app, &key, &id, json!({"filter": filter, "name": "changed"})).await;
        assert_eq!(status, 422, "{problem}");
    }
    let (_, parse) = app
        .post(
            "/api/v1/subscriptions",
            &key,
            json!({"filter": "message.id ==", "name": "s", "url": "http://127.0.0.1:9/x", "event_types": ["*"]}),
        )
        .await;
    assert!(parse["errors"][0]["message"].as_str().unwrap().contains(" at 1:"), "the position: {parse}");
    let (_, list) = app.get("/api/v1/subscriptions", &key).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "nothing was created");
    assert_eq!((&list["data"][0]["filter"], &list["data"][0]["name"]), (&json!(good), &json!("s")), "nor changed");
}

#[tokio::test]
async fn filter_test_says_whether_an_event_matches_and_stores_nothing() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    let try_it = |filter: &str, event: Value| {
        let body = json!({"filter": filter, "event": event});
        async { app.post("/api/v1/subscriptions/filter-test", &key, body).await }
    };
    let eu = event("e1", json!({"subject": "orders/1", "data": {"total": 150}}));
    assert_eq!(try_it("message.data.total > 100", eu.clone()).await, (200, json!({"matches": true, "error": null})));
    assert_eq!(try_it("has(message.time)", eu.clone()).await, (200, json!({"matches": false, "error": null})));
    let (status, failed) = try_it("message.data.missing > 1", eu.clone()).await;
    assert_eq!((status, &failed["matches"]), (200, &json!(false)));
    assert!(failed["error"].as_str().unwrap().contains("missing"), "{failed}");

    let (status, problem) = try_it("1 + 2", eu).await;
    assert_eq!((status, fields(&problem)), (422, vec!["filter".to_string()]), "{problem}");
    let (status, problem) = try_it("true", json!({"specversion": "1.0", "source": "/s", "type": "t"})).await;
    assert_eq!((status, fields(&problem)), (422, vec!["event.id".to_string()]), "{problem}");
    let (_, events) = app.get("/api/v1/events", &key).await;
    assert!(events["data"].as_array().unwrap().is_empty(), "nothing was published: {events}");
    let (status, _) = app.post("/api/v1/subscriptions/filter-test", ADMIN_TOKEN, json!({"filter": "true"})).await;
    assert_eq!(status, 422, "an event is required");
}

#[tokio::test]
async fn an_archive_replay_sends_only_what_the_filter_accepts() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    let since = chrono::DateTime::from_timestamp_millis(app.now_ms()).unwrap().to_rfc3339();
    assert_eq!(routed(&app, &key, event("a", json!({"data": {"total": 500}}))).await, 0);
    assert_eq!(routed(&app, &key, event("b", json!({"data": {"total": 5}}))).await, 0);
    app.advance_secs(1.0);
    let until = chrono::DateTime::from_timestamp_millis(app.now_ms()).unwrap().to_rfc3339();
    let body =
        json!({"name": "s", "url": "http://127.0.0.1:9/x", "event_types": ["*"], "filter": "message.data.total > 100"});
    let id = app.subscribe(&key, body).await["id"].as_str().unwrap().to_string();
    let (status, replayed) =
        app.post("/api/v1/events/replay", &key, json!({"since": since, "until": until, "subscription_id": id})).await;
    assert_eq!((status, &replayed["replayed"]), (202, &json!(1)), "{replayed}");
}
