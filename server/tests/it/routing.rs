//! A publish routes with each customer's subscriptions as last read; changes
//! made behind Herald's back (another process, or SQL by hand) must still route
//! the next publish, and an endpoint whose circuit opened meanwhile must not be
//! handed new messages as if it were closed.

use crate::common;

use std::sync::Arc;

use common::TestApp;
use herald::pipeline::endpoint_permits::EndpointPermits;
use herald::pipeline::handoff::Dispatch;
use sea_orm::ConnectionTrait;
use serde_json::json;

fn message_count(published: &serde_json::Value) -> usize {
    published["message_ids"].as_array().expect("message ids").len()
}

#[tokio::test]
async fn subscriptions_changed_outside_herald_route_the_next_publish() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "s", "url": "http://127.0.0.1:9/x", "event_types": ["order.created"]})).await;
    assert_eq!(message_count(&app.publish(&key, "e1", "order.created").await), 1);

    let db = &app.services.db;
    db.execute_unprepared(r#"UPDATE subscriptions SET event_types = '["order.paid"]'"#).await.unwrap();
    assert_eq!(message_count(&app.publish(&key, "e2", "order.created").await), 0, "no longer subscribed");
    assert_eq!(message_count(&app.publish(&key, "e3", "order.paid").await), 1, "subscribed to the new type");

    db.execute_unprepared("DELETE FROM subscriptions").await.unwrap();
    assert_eq!(message_count(&app.publish(&key, "e4", "order.paid").await), 0, "the subscription is gone");
}

#[tokio::test]
async fn an_endpoint_disabled_outside_the_publish_is_not_handed_messages() {
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "s", "url": "http://127.0.0.1:9/x", "event_types": ["*"]})).await;
    let mut lane =
        app.services.pipeline.handoff.open(Arc::new(tokio::sync::Semaphore::new(10)), EndpointPermits::new(10), 10, 10);
    let first = app.publish(&key, "e1", "t").await;
    assert!(matches!(lane.try_recv(), Ok(Dispatch::Start(_))), "a closed endpoint's message starts at once");
    assert_eq!(app.message(&key, first["message_ids"][0].as_str().unwrap()).await["state"], "delivering");

    // Another process's recorder opens the circuit.
    let far = app.now_ms() + 3_600_000;
    let disable = format!("UPDATE endpoints SET state = 'disabled', next_probe_at = {far}");
    app.services.db.execute_unprepared(&disable).await.unwrap();
    let second = app.publish(&key, "e2", "t").await;
    assert!(lane.try_recv().is_err(), "nothing is handed to a disabled endpoint");
    assert_eq!(app.message(&key, second["message_ids"][0].as_str().unwrap()).await["state"], "pending");

    // Closed again: messages are handed over again.
    app.services.db.execute_unprepared("UPDATE endpoints SET state = 'closed', next_probe_at = NULL").await.unwrap();
    app.publish(&key, "e3", "t").await;
    assert!(matches!(lane.try_recv(), Ok(Dispatch::Start(_))), "the closed endpoint is handed messages again");
}
