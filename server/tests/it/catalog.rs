//! The event-type catalog: its routes and their isolation, schemas that
//! publishing checks (a batch refused whole, nothing stored), examples that
//! keep their schema, and `send-example` reaching only its subscription.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{ADMIN_TOKEN, TestApp};

fn fields(problem: &Value) -> Vec<String> {
    problem["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap().to_string()).collect()
}

fn order_schema() -> Value {
    json!({
        "type": "object",
        "required": ["total"],
        "properties": {"total": {"type": "number"}, "items": {"type": "array", "items": {"type": "string"}}},
    })
}

fn order(id: &str, data: Value) -> Value {
    json!({"specversion": "1.0", "id": id, "source": "/shop", "type": "order.created", "data": data})
}

async fn publish_batch(app: &TestApp, key: &str, events: Vec<Value>) -> (u16, Value) {
    let resp = app
        .http
        .post(format!("{}/api/v1/events", app.base))
        .bearer_auth(key)
        .header("content-type", "application/cloudevents-batch+json")
        .body(Value::Array(events).to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

async fn event_count(app: &TestApp, key: &str) -> usize {
    app.get("/api/v1/events", key).await.1["data"].as_array().unwrap().len()
}

#[tokio::test]
async fn the_catalog_is_each_customers_own() {
    let app = TestApp::start().await;
    let (acme, key_a) = app.customer("acme").await;
    let (_, key_b) = app.customer("globex").await;
    let body = json!({"name": "order.created", "description": "An order was placed", "schema": order_schema(),
        "example": {"total": 12.5, "items": ["book"]}});
    let (status, created) = app.post("/api/v1/event-types", &key_a, body.clone()).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!((&created["schema"], &created["customer_id"]), (&order_schema(), &json!(acme)));
    assert_eq!(app.post("/api/v1/event-types", &key_a, body.clone()).await.0, 409, "a taken name");
    assert_eq!(app.post("/api/v1/event-types", &key_b, body).await.0, 201, "another customer's catalog");
    app.post("/api/v1/event-types", &key_a, json!({"name": "order.paid"})).await;

    let (_, mine) = app.get("/api/v1/event-types?limit=1", &key_a).await;
    assert_eq!(mine["data"][0]["name"], "order.paid", "newest first");
    let cursor = mine["next_cursor"].as_str().expect("a second page");
    let (_, next) = app.get(&format!("/api/v1/event-types?limit=1&cursor={cursor}"), &key_a).await;
    assert_eq!((next["data"][0]["name"].as_str(), &next["next_cursor"]), (Some("order.created"), &Value::Null));
    let (_, theirs) = app.get("/api/v1/event-types", &key_b).await;
    assert_eq!(theirs["data"].as_array().unwrap().len(), 1, "globex sees its own only: {theirs}");

    assert_eq!(app.get("/api/v1/event-types/order.paid", &key_b).await.0, 404);
    let gone = app.call(Method::DELETE, "/api/v1/event-types/order.paid", Some(&key_b), None).await;
    assert_eq!(gone.0, 404, "globex cannot remove acme's type");
    let (status, _) = app.get("/api/v1/event-types/order.paid", ADMIN_TOKEN).await;
    assert_eq!(status, 422, "the admin names the customer");
    let (status, _) = app.get(&format!("/api/v1/event-types/order.paid?customer_id={acme}"), ADMIN_TOKEN).await;
    assert_eq!(status, 200);

    let patch = json!({"description": null, "example": {"total": 3}});
    let (status, changed) =
        app.call(Method::PATCH, "/api/v1/event-types/order.created", Some(&key_a), Some(patch)).await;
    assert_eq!((status, &changed["description"], &changed["example"]), (200, &Value::Null, &json!({"total": 3})));
    let removed = app.call(Method::DELETE, "/api/v1/event-types/order.created", Some(&key_a), None).await;
    assert_eq!(removed.0, 204);
    let (_, audit) = app.get("/api/v1/audit-log", &key_a).await;
    let actions: Vec<&str> = audit["data"].as_array().unwrap().iter().map(|r| r["action"].as_str().unwrap()).collect();
    for action in ["event_type.create", "event_type.update", "event_type.delete"] {
        assert!(actions.contains(&action), "{action}: {actions:?}");
    }
}

#[tokio::test]
async fn bad_types_are_refused_naming_the_field_and_nothing_changes() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    for (body, field) in [
        (json!({"name": "herald.message.dead"}), "name"),
        (json!({"name": ""}), "name"),
        (json!({"name": "t", "schema": {"type": "not-a-type"}}), "schema"),
        (json!({"name": "t", "schema": [1]}), "schema"),
        (json!({"name": "t", "schema": order_schema(), "example": {"total": "many"}}), "example"),
    ] {
        let (status, problem) = app.post("/api/v1/event-types", &key, body.clone()).await;
        assert_eq!((status, fields(&problem)), (422, vec![field.to_string()]), "{body}: {problem}");
    }
    let (_, listed) = app.get("/api/v1/event-types", &key).await;
    assert!(listed["data"].as_array().unwrap().is_empty(), "nothing was stored");

    let body = json!({"name": "t", "schema": order_schema(), "example": {"total": 1}});
    assert_eq!(app.post("/api/v1/event-types", &key, body).await.0, 201);
    let patch = json!({"schema": {"type": "object", "required": ["currency"]}});
    let (status, problem) = app.call(Method::PATCH, "/api/v1/event-types/t", Some(&key), Some(patch)).await;
    assert_eq!((status, fields(&problem)), (422, vec!["example".to_string()]), "the kept example breaks it");
    let (_, kept) = app.get("/api/v1/event-types/t", &key).await;
    assert_eq!(kept["schema"], order_schema(), "nothing changed");
}

#[tokio::test]
async fn a_schema_checks_what_is_published_and_a_batch_is_refused_whole() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "s", "url": "http://127.0.0.1:9/x", "event_types": ["*"]})).await;
    // Routed once before the schema exists, so the kept routing must learn of it.
    let (status, _) = app.post("/api/v1/events", &key, order("before", json!({"total": "x"}))).await;
    assert_eq!(status, 202, "no schema yet");
    let body = json!({"name": "order.created", "schema": order_schema()});
    assert_eq!(app.post("/api/v1/event-types", &key, body).await.0, 201);

    let (status, problem) = app.post("/api/v1/events", &key, order("bad", json!({"total": "x", "items": [1]}))).await;
    assert_eq!((status, fields(&problem)), (422, vec!["data".to_string(), "data".to_string()]), "{problem}");
    let messages: Vec<&str> =
        problem["errors"].as_array().unwrap().iter().map(|e| e["message"].as_str().unwrap()).collect();
    assert!(
        messages.iter().any(|m| m.starts_with("at /total:")) && messages.iter().any(|m| m.starts_with("at /items/0:")),
        "{messages:?}"
    );
    assert_eq!(app.post("/api/v1/events", &key, order("good", json!({"total": 5}))).await.0, 202);

    let other = json!({"specversion": "1.0", "id": "o", "source": "/shop", "type": "order.paid", "data": 1});
    let (status, problem) =
        publish_batch(&app, &key, vec![order("b1", json!({"total": 1})), other, order("b2", json!({}))]).await;
    assert_eq!((status, fields(&problem)), (422, vec!["[2].data".to_string()]), "{problem}");
    assert_eq!(event_count(&app, &key).await, 2, "nothing of the refused requests was stored");

    app.call(Method::DELETE, "/api/v1/event-types/order.created", Some(&key), None).await;
    assert_eq!(app.post("/api/v1/events", &key, order("after", json!({"total": "x"}))).await.0, 202, "no schema now");
}

#[tokio::test]
async fn send_example_reaches_only_its_subscription() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    let (_, key_b) = app.customer("globex").await;
    let sub = |name: &str| json!({"name": name, "url": format!("http://127.0.0.1:9/{name}"), "event_types": ["*"]});
    let chosen = app.subscribe(&key, sub("chosen")).await["id"].as_str().unwrap().to_string();
    app.subscribe(&key, sub("other")).await;
    let example = json!({"total": 42});
    app.post("/api/v1/event-types", &key, json!({"name": "order.created", "example": example})).await;
    app.post("/api/v1/event-types", &key, json!({"name": "order.paid"})).await;
    let path = format!("/api/v1/subscriptions/{chosen}/send-example");

    let (status, sent) = app.post(&path, &key, json!({"event_type": "order.created"})).await;
    assert_eq!(status, 202, "{sent}");
    let published = &sent["events"][0];
    assert_eq!(
        (published["source"].as_str(), published["message_ids"].as_array().unwrap().len()),
        (Some("/herald/example"), 1)
    );
    let message = app.message(&key, published["message_ids"][0].as_str().unwrap()).await;
    assert_eq!(message["subscription_id"], chosen.as_str());
    let (_, detail) = app.get(&format!("/api/v1/events/{}", published["id"].as_str().unwrap()), &key).await;
    assert_eq!((&detail["event"]["data"], &detail["event"]["type"]), (&example, &json!("order.created")));

    let (status, _) = app.post(&path, &key, json!({"event_type": "order.paid"})).await;
    assert_eq!(status, 409, "no example");
    let (status, problem) = app.post(&path, &key, json!({"event_type": "order.refunded"})).await;
    assert_eq!((status, fields(&problem)), (404, vec!["event_type".to_string()]), "not in the catalog");
    assert_eq!(app.post(&path, &key_b, json!({"event_type": "order.created"})).await.0, 404, "not globex's");
}
