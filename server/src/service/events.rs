//! Publishing: parsing, who may publish for whom, and the test event. The
//! events and their messages are written by the intake (group commit).

use app::domain::dto;
use app::domain::errors::FieldError;
use app::domain::event::CloudEvent;
use app::domain::operational;
use sea_orm::TransactionTrait;
use serde_json::Value;

use super::{Principal, Result, ServiceError, Services};
use crate::ids::new_id;
use crate::store::entities::event;
use crate::store::messages::pending_message;
use crate::store::subscriptions::policy_of;
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
        (single, false) => return Ok(vec![publishable(single, "").map_err(ServiceError::Invalid)?]),
    };
    let mut parsed = Vec::with_capacity(items.len());
    let mut errors: Vec<FieldError> = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        match publishable(item, &format!("[{i}]")) {
            Ok(event) => parsed.push(event),
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() { Ok(parsed) } else { Err(ServiceError::Invalid(errors)) }
}

/// A valid CloudEvent whose type is not one of Herald's own (`herald.` is reserved).
fn publishable(value: Value, prefix: &str) -> std::result::Result<CloudEvent, Vec<FieldError>> {
    let event = CloudEvent::parse(value, prefix)?;
    if operational::is_herald_type(event.event_type()) {
        let field = if prefix.is_empty() { "type".to_string() } else { format!("{prefix}.type") };
        let reason = format!("the prefix {:?} is reserved for Herald's own events", operational::RESERVED_PREFIX);
        return Err(vec![FieldError::new(field, reason)]);
    }
    Ok(event)
}

pub async fn publish(
    services: &Services,
    who: &Principal,
    customer_id: Option<&str>,
    events_in: Vec<CloudEvent>,
) -> Result<dto::PublishResult> {
    let customer_id = who.customer_for_write(customer_id)?;
    if matches!(who, Principal::Admin { .. }) {
        customers::get(&services.db, &customer_id).await?.ok_or(ServiceError::NotFound("customer"))?;
    }
    let result = services.pipeline.publish(customer_id, events_in).await?;
    let created: usize = result.events.iter().filter(|e| !e.duplicate).map(|e| e.message_ids.len()).sum();
    let metrics = crate::telemetry::hot();
    metrics.events_published.increment(result.events.len() as u64);
    metrics.messages_created.increment(created as u64);
    Ok(result)
}

/// Publishes a `herald.test` event to one subscription only (the dashboard's
/// "send a test event"); returns the message id.
pub async fn send_test(services: &Services, who: &Principal, subscription_id: &str) -> Result<String> {
    let sub = subscriptions::get(&services.db, subscription_id)
        .await?
        .filter(|s| who.sees(&s.customer_id))
        .ok_or(ServiceError::NotFound("subscription"))?;
    let now = services.now_ms();
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
    let txn = services.db.begin().await?;
    events::insert_new(&txn, row).await?;
    messages::insert_many(&txn, vec![msg]).await?;
    notify::send(&txn, services.pipeline.wake.origin()).await?;
    txn.commit().await?;
    services.pipeline.wake.notify_one();
    Ok(id)
}
