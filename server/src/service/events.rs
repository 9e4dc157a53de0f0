//! Publishing: parsing, who may publish for whom, and the test event. The
//! events and their messages are written by the intake (group commit).

use std::sync::{Arc, LazyLock, Mutex};

use app::domain::dto;
use app::domain::errors::FieldError;
use foldhash::HashMap;

use app::domain::event::CloudEvent;
use app::domain::policy::RetryPolicy;
use app::domain::states::MessageState;
use sea_orm::TransactionTrait;
use serde_json::Value;

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
    let result = state.intake.publish(customer_id, events_in).await?;
    let created: usize = result.events.iter().filter(|e| !e.duplicate).map(|e| e.message_ids.len()).sum();
    let metrics = crate::telemetry::hot();
    metrics.events_published.increment(result.events.len() as u64);
    metrics.messages_created.increment(created as u64);
    Ok(result)
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
    let mut row = event::Model {
        id: new_id("evt"),
        customer_id: sub.customer_id.clone(),
        source: "/herald/test".into(),
        ce_id,
        event_type: "herald.test".into(),
        payload: payload.to_string(),
        created_at: now,
        message_ids: String::new(),
    };
    let mut msg = pending_message(&row, sub.id.clone(), sub.endpoint_id.clone(), now);
    msg.expires_at = now + policy_of(&sub).ttl_secs as i64 * 1000;
    let id = msg.id.clone();
    row.add_message_id(&id);
    let txn = state.db.begin().await?;
    events::insert_new(&txn, row).await?;
    messages::insert_many(&txn, vec![msg]).await?;
    notify::send(&txn, state.wake.origin()).await?;
    txn.commit().await?;
    state.wake.notify_one();
    Ok(id)
}

pub(super) fn pending_message(
    event: &event::Model,
    subscription_id: String,
    endpoint_id: String,
    now: i64,
) -> message::Model {
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
pub fn policy_of(sub: &subscription::Model) -> Arc<RetryPolicy> {
    stored_policy(&sub.retry_policy)
}

fn stored_policy(text: &str) -> Arc<RetryPolicy> {
    if let Some(policy) = POLICIES.lock().expect("policies lock").get(text) {
        return policy.clone();
    }
    let policy = Arc::new(
        serde_json::from_str(text)
            .ok()
            .and_then(|v| RetryPolicy::parse(&v, "retry_policy").ok())
            .unwrap_or_else(RetryPolicy::default_policy),
    );
    let mut known = POLICIES.lock().expect("policies lock");
    if known.len() >= MAX_POLICIES {
        known.clear();
    }
    known.insert(text.to_string(), policy.clone());
    policy
}

/// The retry policies read so far, by their stored text. Every publish and every
/// delivery needs its subscription's policy; reading the JSON each time cost more
/// than this lookup. Few distinct texts exist (presets, mostly); past the bound
/// the map starts over.
static POLICIES: LazyLock<Mutex<HashMap<String, Arc<RetryPolicy>>>> = LazyLock::new(Default::default);
const MAX_POLICIES: usize = 1024;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use app::domain::policy::{Preset, Schedule};

    use super::stored_policy;

    #[test]
    fn a_stored_policy_is_read_once_per_text() {
        let workfront = r#""workfront""#;
        let first = stored_policy(workfront);
        assert_eq!(first.schedule, Schedule::Preset(Preset::Workfront));
        assert!(Arc::ptr_eq(&first, &stored_policy(workfront)), "the second reading is the first's");
        let other = stored_policy(r#"{"kind":"exponential","min_delay_secs":1,"max_delay_secs":60}"#);
        assert_eq!(other.schedule, Schedule::Exponential { min_delay_secs: 1, max_delay_secs: 60 });
    }
}
