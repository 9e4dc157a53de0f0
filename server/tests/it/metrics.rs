//! The metrics an operator alerts on: the gauges read from the database, and
//! the deaths counted by reason.

use domain::states::{EndpointState, MessageState};
use herald::pipeline::gauges;
use herald::store::messages::Lane;
use serde_json::json;

use crate::common::{TestApp, TestReceiver};

/// The value of one series in the Prometheus text, 0 when it is absent.
async fn series(app: &TestApp, name_and_labels: &str) -> f64 {
    let text = reqwest::get(format!("{}/metrics", app.base)).await.unwrap().text().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(name_and_labels).and_then(|rest| rest.trim().parse().ok()))
        .unwrap_or(0.0)
}

#[tokio::test]
async fn the_gauges_count_each_state_and_the_age_of_the_oldest_due_message() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    let policy = json!({"kind": "exponential", "min_delay_secs": 60, "max_delay_secs": 60, "max_attempts": 5, "retry_on": "transient"});
    app.subscribe(&key, json!({"name": "s", "url": rx.url, "event_types": ["*"], "retry_policy": policy})).await;
    let dead_before = series(&app, r#"herald_dead_messages_total{reason="non_retryable"}"#).await;
    // One delivered, one dead (a 400 is permanent), one waiting for its retry; one more not sent yet.
    for status in [200, 400, 503] {
        rx.answer(status);
    }
    for n in 0..3 {
        app.publish(&key, &format!("e{n}"), "t").await;
        app.deliver_fresh().await;
    }
    app.publish(&key, "e3", "t").await;
    app.advance_secs(5.0);

    let reading = gauges::read(&app.services.pipeline, &app.services.db).await.unwrap();
    let count = |state: MessageState| reading.messages.iter().find(|(s, _)| *s == state).map(|(_, n)| *n);
    assert_eq!(count(MessageState::Pending), Some(2));
    assert_eq!(count(MessageState::Delivering), Some(0));
    assert_eq!(count(MessageState::Held), Some(0));
    assert_eq!(count(MessageState::Dead), Some(1));
    assert_eq!(count(MessageState::Delivered), Some(1));
    assert_eq!(reading.oldest_due_secs, [(Lane::Fresh, 5.0), (Lane::Retry, 0.0)], "the retry is due in 55 s");
    assert_eq!(
        reading.endpoints,
        vec![(EndpointState::Closed, 1), (EndpointState::Disabled, 0), (EndpointState::Locked, 0)]
    );

    app.advance_secs(60.0);
    let later = gauges::read(&app.services.pipeline, &app.services.db).await.unwrap();
    assert_eq!(later.oldest_due_secs[1], (Lane::Retry, 5.0), "the retry has been due for 5 s");

    // No test process runs the gauges' timer: this reading is the one published.
    gauges::publish(&reading);
    assert_eq!(series(&app, r#"herald_messages{state="pending"}"#).await, 2.0);
    assert_eq!(series(&app, r#"herald_oldest_due_seconds{lane="fresh"}"#).await, 5.0);
    assert_eq!(series(&app, r#"herald_endpoints{state="closed"}"#).await, 1.0);
    // Deaths are counted when their transaction commits (other tests here count theirs too).
    let dead_after = series(&app, r#"herald_dead_messages_total{reason="non_retryable"}"#).await;
    assert!(dead_after >= dead_before + 1.0, "the 400's death is counted: {dead_before} → {dead_after}");
}

#[tokio::test]
async fn the_admins_overview_reads_the_gauges_latest_counts_while_they_are_fresh() {
    use domain::dto::Overview;
    use herald::service::{Principal, overview::overview};
    let app = TestApp::start().await;
    let (customer_id, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "s", "url": "https://example.com/hook", "event_types": ["*"]})).await;
    app.publish(&key, "e1", "t").await;
    let pending = |o: Overview| o.counts.iter().find(|(s, _)| *s == MessageState::Pending).map(|(_, n)| *n);
    let admin = Principal::Admin { actor: "admin".into() };
    let customer = Principal::Customer { customer_id: customer_id.into(), actor: "acme".into() };
    assert_eq!(pending(overview(&app.services, &admin).await.unwrap()), Some(1), "no reading yet: the table");

    app.services.pipeline.gauges.set(app.now_ms(), vec![(MessageState::Pending, 7)]);
    assert_eq!(pending(overview(&app.services, &admin).await.unwrap()), Some(7), "the gauges' latest reading");
    assert_eq!(pending(overview(&app.services, &customer).await.unwrap()), Some(1), "a customer's own counts");
    app.advance_secs(21.0);
    assert_eq!(pending(overview(&app.services, &admin).await.unwrap()), Some(1), "a stale reading is not used");
}
