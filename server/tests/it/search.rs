//! A filter no index answers (an event type, a source) reads at most a budget of rows per page:
//! a page that runs out of it before it fills stops short, says how far back it searched, and
//! its cursor searches on from there.

use domain::states::MessageState;
use herald::store::entities::{event, message};
use herald::store::page::SCAN_BUDGET;
use serde_json::Value;

use crate::common::TestApp;

/// A message and an event of type `rare` (source `/rare`) at the bottom of the customer's history,
/// under more than a page's budget of `common` ones, and one more of each 5 010 rows from the top
/// (past the first thousand a page reads); returns the ids of both, the bottom one's first (the
/// message's, and the event's CloudEvent id).
pub(crate) async fn rare_under_common(app: &TestApp, customer_id: &str) -> [(String, String); 2] {
    let start = app.now_ms() - 86_400_000;
    let (mut messages, mut events) = (Vec::new(), Vec::new());
    for i in 0..=SCAN_BUDGET + 10 {
        let at = start + i as i64;
        let rare = i == 0 || i == MIDDLE;
        let (event_type, source) = if rare { ("rare", "/rare") } else { ("common", "/common") };
        let event_id = format!("evt_{}", ulid::Ulid::from_parts(at as u64, 1));
        events.push(event::Model {
            id: event_id.clone().into(),
            customer_id: customer_id.into(),
            source: source.into(),
            ce_id: format!("e{i}"),
            event_type: event_type.into(),
            payload: "{}".into(),
            created_at: at,
            message_ids: String::new(),
        });
        messages.push(message::Model {
            id: format!("msg_{}", ulid::Ulid::from_parts(at as u64, 1)).into(),
            customer_id: customer_id.into(),
            event_id: event_id.into(),
            subscription_id: "sub_1".into(),
            endpoint_id: "ep_1".into(),
            event_type: event_type.into(),
            state: MessageState::Delivered,
            dead_reason: None,
            attempt_count: 1,
            attempt_base: 0,
            ttl_started_at: at,
            expires_at: at + 86_400_000,
            next_attempt_at: None,
            lease_token: None,
            created_at: at,
            updated_at: at,
            delivered_at: Some(at),
            last_status: Some(200),
            first_failed_at: None,
        });
    }
    let db = &app.services.db;
    herald::store::bulk::insert(db, &events).await.unwrap();
    herald::store::messages::insert_many(db, &messages).await.unwrap();
    let ids = |i: usize| (messages[i].id.to_string(), events[i].ce_id.clone());
    [ids(0), ids(MIDDLE as usize)]
}

/// The second rare row's place: 5 010 rows from the newest.
const MIDDLE: u64 = SCAN_BUDGET - 5_000;

fn ids(page: &Value) -> Vec<&str> {
    page["data"].as_array().unwrap().iter().map(|row| row["id"].as_str().unwrap()).collect()
}

/// Asserts the first page of `path` finds `middle` and stops short, and that its cursor finds `bottom`.
async fn stops_then_finds(app: &TestApp, key: &str, path: &str, [bottom, middle]: [&str; 2], stopped_at_ms: i64) {
    let (status, first) = app.get(path, key).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(ids(&first), [middle], "{path}: {first}");
    let cursor = first["next_cursor"].as_str().unwrap_or_else(|| panic!("{path} continues: {first}"));
    let searched = first["searched_back_to"].as_str().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    assert_eq!(searched.map(|t| t.timestamp_millis()), Some(stopped_at_ms), "{path}: {first}");
    let (status, next) = app.get(&format!("{path}&cursor={cursor}"), key).await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(ids(&next), [bottom], "{path}: {next}");
    assert_eq!((&next["next_cursor"], next.get("searched_back_to")), (&Value::Null, None), "the end: {next}");
}

#[tokio::test]
async fn a_search_no_index_answers_stops_at_its_budget_and_its_cursor_goes_on() {
    let app = TestApp::start().await;
    let (customer, key) = app.customer("acme").await;
    let [(message, event), (middle_message, middle_event)] = rare_under_common(&app, &customer).await;
    let (messages, events) = ([message.as_str(), &middle_message], [event.as_str(), &middle_event]);
    // The page read the newest SCAN_BUDGET rows: it stopped at the 11th from the bottom.
    let at = app.now_ms() - 86_400_000 + 11;
    stops_then_finds(&app, &key, "/api/v1/messages?event_type=rare", messages, at).await;
    stops_then_finds(&app, &key, "/api/v1/events?type=rare", events, at).await;
    stops_then_finds(&app, &key, "/api/v1/events?source=%2Frare", events, at).await;

    // A filter that fills its page within the budget, or one an index answers, reads no further.
    for path in
        ["/api/v1/messages?event_type=common&limit=10", "/api/v1/messages?limit=10", "/api/v1/events?type=common"]
    {
        let (status, page) = app.get(path, &key).await;
        assert_eq!(status, 200, "{page}");
        assert!(page["next_cursor"].is_string() && page.get("searched_back_to").is_none(), "{path}: {page}");
    }
    let (_, dead) = app.get("/api/v1/messages?state=dead", &key).await;
    assert_eq!((ids(&dead).len(), dead.get("searched_back_to")), (0, None), "the log by state is an index: {dead}");
}
