//! Publishing: the event and one message per matching subscription are
//! committed in one transaction before the answer; only then is the
//! dispatcher woken (outbox: an acknowledged event is never lost).

use app::domain::dto;
use app::domain::errors::FieldError;
use std::collections::HashMap;

use app::domain::event::CloudEvent;
use app::domain::policy::RetryPolicy;
use app::domain::states::MessageState;
use sea_orm::TransactionTrait;
use serde_json::Value;

use super::subscriptions::matches;
use super::{Principal, Result, ServiceError};
use crate::ids::new_id;
use crate::state::AppState;
use crate::store::entities::subscription;
use crate::store::entities::{event, message};
use crate::store::{customers, events, messages, notify, subscriptions};

pub const MAX_BATCH: usize = 1000;

/// Parses one event, or a batch when `batch` is set (the body must then be an array).
pub fn parse(body: Value, batch: bool) -> Result<Vec<CloudEvent>> {
    let items = match (body, batch) {
        (Value::Array(items), _) => {
            if items.is_empty() || items.len() > MAX_BATCH {
                return Err(ServiceError::field("body", "a batch holds 1 to 1000 events"));
            }
            items
        }
        (_, true) => return Err(ServiceError::field("body", "a batch must be a JSON array of events")),
        (single, false) => return Ok(vec![CloudEvent::parse(single, "").map_err(ServiceError::Invalid)?]),
    };
    let mut parsed = Vec::with_capacity(items.len());
    let mut errors: Vec<FieldError> = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        match CloudEvent::parse(item, &format!("[{i}]")) {
            Ok(event) => parsed.push(event),
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() { Ok(parsed) } else { Err(ServiceError::Invalid(errors)) }
}

pub async fn publish(
    state: &AppState,
    who: &Principal,
    customer_id: Option<&str>,
    events_in: Vec<CloudEvent>,
) -> Result<dto::PublishResult> {
    let customer_id = who.customer_for_write(customer_id)?;
    if matches!(who, Principal::Admin { .. }) {
        customers::get(&state.db, &customer_id).await?.ok_or(ServiceError::NotFound("customer"))?;
    }
    let now = state.now_ms();
    let txn = state.db.begin().await?;
    let targets = subscriptions::active_for_customer(&txn, &customer_id).await?;
    // Each message's TTL comes from its subscription's policy.
    let ttl_ms: HashMap<&str, i64> =
        targets.iter().map(|s| (s.id.as_str(), policy_of(s).ttl_secs as i64 * 1000)).collect();
    let mut answers = Vec::with_capacity(events_in.len());
    let mut new_messages = Vec::new();
    for ce in events_in {
        let row = event::Model {
            id: new_id("evt"),
            customer_id: customer_id.clone(),
            source: ce.source().to_string(),
            ce_id: ce.id().to_string(),
            event_type: ce.event_type().to_string(),
            payload: ce.to_json().to_string(),
            created_at: now,
        };
        if events::insert_new(&txn, row.clone()).await? {
            let mut ids = Vec::new();
            for sub in targets.iter().filter(|s| matches(&s.event_types, ce.event_type())) {
                let mut msg = pending_message(&row, sub.id.clone(), sub.endpoint_id.clone(), now);
                msg.expires_at = now + ttl_ms[sub.id.as_str()];
                ids.push(msg.id.clone());
                new_messages.push(msg);
            }
            answers.push(dto::PublishedEvent { id: row.ce_id, source: row.source, duplicate: false, message_ids: ids });
        } else {
            let existing = events::find_by_key(&txn, &customer_id, ce.source(), ce.id())
                .await?
                .ok_or(ServiceError::Conflict("the event is being published concurrently; try again".into()))?;
            let ids = messages::ids_for_event(&txn, &existing.id).await?;
            answers.push(dto::PublishedEvent {
                id: existing.ce_id,
                source: existing.source,
                duplicate: true,
                message_ids: ids,
            });
        }
    }
    let created = new_messages.len();
    messages::insert_many(&txn, new_messages).await?;
    if created > 0 {
        notify::send(&txn).await?;
    }
    txn.commit().await?;
    if created > 0 {
        state.wake.notify_one();
    }
    metrics::counter!("herald_events_published_total").increment(answers.len() as u64);
    metrics::counter!("herald_messages_created_total").increment(created as u64);
    Ok(dto::PublishResult { events: answers })
}

/// Publishes a `herald.test` event to one subscription only (the dashboard's
/// "send a test event"); returns the message id.
pub async fn send_test(state: &AppState, who: &Principal, subscription_id: &str) -> Result<String> {
    let sub = subscriptions::get(&state.db, subscription_id)
        .await?
        .filter(|s| who.sees(&s.customer_id))
        .ok_or(ServiceError::NotFound("subscription"))?;
    let now = state.now_ms();
    let ce_id = new_id("test");
    let payload = serde_json::json!({
        "specversion": "1.0", "id": ce_id, "source": "/herald/test", "type": "herald.test",
        "time": crate::clock::to_utc(now).to_rfc3339(), "data": {"message": "A test event from Herald."}
    });
    let row = event::Model {
        id: new_id("evt"),
        customer_id: sub.customer_id.clone(),
        source: "/herald/test".into(),
        ce_id,
        event_type: "herald.test".into(),
        payload: payload.to_string(),
        created_at: now,
    };
    let mut msg = pending_message(&row, sub.id.clone(), sub.endpoint_id.clone(), now);
    msg.expires_at = now + policy_of(&sub).ttl_secs as i64 * 1000;
    let id = msg.id.clone();
    let txn = state.db.begin().await?;
    events::insert_new(&txn, row).await?;
    messages::insert_many(&txn, vec![msg]).await?;
    notify::send(&txn).await?;
    txn.commit().await?;
    state.wake.notify_one();
    Ok(id)
}

fn pending_message(event: &event::Model, subscription_id: String, endpoint_id: String, now: i64) -> message::Model {
    message::Model {
        id: new_id("msg"),
        customer_id: event.customer_id.clone(),
        event_id: event.id.clone(),
        subscription_id,
        endpoint_id,
        event_type: event.event_type.clone(),
        state: MessageState::Pending.as_str().into(),
        dead_reason: None,
        attempt_count: 0,
        attempt_base: 0,
        ttl_started_at: now,
        expires_at: now,
        next_attempt_at: Some(now),
        lease_token: None,
        created_at: now,
        updated_at: now,
        delivered_at: None,
        last_status: None,
    }
}

/// The subscription's stored policy (validated when it was saved).
pub fn policy_of(sub: &subscription::Model) -> RetryPolicy {
    serde_json::from_str(&sub.retry_policy)
        .ok()
        .and_then(|v| RetryPolicy::parse(&v, "retry_policy").ok())
        .unwrap_or_else(RetryPolicy::default_policy)
}
