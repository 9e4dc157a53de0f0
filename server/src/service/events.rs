//! Publishing: parsing, who may publish for whom, and the test event (the
//! events and their messages are written by the intake, by group commit); the
//! archive of kept events, and the replay of a time window of it.

use domain::dto;
use domain::errors::FieldError;
use domain::event::CloudEvent;
use domain::ids::{CustomerId, EventId, MessageId, SubscriptionId};
use domain::query::{EventQuery, TimeParam, text_of};
use domain::request::SendExampleBody;
use sea_orm::TransactionTrait;
use serde_json::{Value, json};

use super::{Principal, Result, ServiceError, Services, idempotency};
use crate::ids::{self, new_id};
use crate::pipeline::{Due, PublishError};
use crate::store::entities::event;
use crate::store::events::EventFilter;
use crate::store::messages::pending_message;
use crate::store::page::{self, PageRequest};
use crate::store::subscriptions::policy_of;
use crate::store::{self, customers, events, messages, subscriptions};

pub async fn publish(
    services: &Services,
    who: &Principal,
    customer_id: Option<&str>,
    events_in: Vec<CloudEvent>,
    batch: bool,
) -> Result<dto::PublishResult> {
    who.require_writer()?;
    let customer_id = who.customer_for_write(customer_id)?;
    if matches!(who, Principal::Admin { .. }) {
        customers::get(&services.db, &customer_id).await?.ok_or(ServiceError::NotFound("customer"))?;
    }
    if events_in.is_empty() {
        // An empty batch is valid, and stores nothing.
        return Ok(dto::PublishResult { events: Vec::new() });
    }
    let result = services.pipeline.publish(customer_id, events_in).await.map_err(|error| match error {
        PublishError::Invalid(broken) => data_errors(broken, batch),
        other => other.into(),
    })?;
    let created: usize = result.events.iter().filter(|e| !e.duplicate).map(|e| e.message_ids.len()).sum();
    let metrics = crate::telemetry::hot();
    metrics.events_published.increment(result.events.len() as u64);
    metrics.messages_created.increment(created as u64);
    Ok(result)
}

/// Events whose data breaks their type's schema, one error per failing part, named `data` (or
/// `[i].data` in a batch).
fn data_errors(broken: Vec<(usize, Vec<String>)>, batch: bool) -> ServiceError {
    let field = |i: usize| if batch { format!("[{i}].data") } else { "data".to_string() };
    let errors = broken.into_iter().flat_map(|(i, why)| why.into_iter().map(move |w| FieldError::new(field(i), w)));
    ServiceError::Invalid(errors.collect())
}

/// Publishes a `herald.test` event to one subscription only (the dashboard's
/// "send a test event"); returns the message id.
pub async fn send_test(services: &Services, who: &Principal, subscription_id: &SubscriptionId) -> Result<MessageId> {
    who.require_writer()?;
    let sub = visible_subscription(services, who, subscription_id).await?;
    let data = json!({"message": "A test event from Herald."});
    let (_, message_id) = publish_to_one(services, &sub, "/herald/test", new_id("test"), "herald.test", data).await?;
    Ok(message_id)
}

/// Publishes the catalog's example of a type as a real event (source `/herald/example`) to one
/// subscription only; answered as a publish. 409 when the type has no example.
pub async fn send_example(
    services: &Services,
    who: &Principal,
    subscription_id: &SubscriptionId,
    body: SendExampleBody,
) -> Result<dto::PublishResult> {
    who.require_writer()?;
    let sub = visible_subscription(services, who, subscription_id).await?;
    let name = body.event_type.0;
    let listed = store::event_types::get(&services.db, &sub.customer_id, &name).await?;
    let listed = listed.ok_or(ServiceError::NotFoundField { field: "event_type", what: "event type" })?;
    let example = listed.example.as_deref().and_then(|text| serde_json::from_str(text).ok());
    let example = example.ok_or_else(|| ServiceError::Conflict(format!("the type {name:?} has no example")))?;
    let ce_id = new_id("example");
    let (_, message_id) = publish_to_one(services, &sub, EXAMPLE_SOURCE, ce_id.clone(), &name, example).await?;
    Ok(published_one(EXAMPLE_SOURCE, ce_id, &message_id))
}

/// The answer to a publish of one event that made one message.
fn published_one(source: &str, ce_id: String, message_id: &MessageId) -> dto::PublishResult {
    let published = dto::PublishedEvent {
        id: ce_id,
        source: source.into(),
        duplicate: false,
        message_ids: vec![message_id.to_string()],
    };
    dto::PublishResult { events: vec![published] }
}

/// Where `send-example`'s events come from.
const EXAMPLE_SOURCE: &str = "/herald/example";

async fn visible_subscription(
    services: &Services,
    who: &Principal,
    id: &SubscriptionId,
) -> Result<crate::store::entities::subscription::Model> {
    subscriptions::get(&services.db, id)
        .await?
        .filter(|s| who.sees(&s.customer_id))
        .ok_or(ServiceError::NotFound("subscription"))
}

/// Stores an event with one pending message, for this subscription alone, and wakes its lane.
async fn publish_to_one(
    services: &Services,
    sub: &crate::store::entities::subscription::Model,
    source: &str,
    ce_id: String,
    event_type: &str,
    data: Value,
) -> Result<(EventId, MessageId)> {
    let now = services.now_ms();
    let payload = json!({
        "specversion": "1.0", "id": ce_id, "source": source, "type": event_type,
        "time": crate::clock::to_utc(now).to_rfc3339(), "datacontenttype": "application/json", "data": data,
    });
    let mut row = event::Model {
        id: ids::new(),
        customer_id: sub.customer_id.clone(),
        source: source.into(),
        ce_id,
        event_type: event_type.into(),
        payload: payload.to_string(),
        created_at: now,
        message_ids: String::new(),
    };
    let mut msg = pending_message(&row, sub.id.clone(), sub.endpoint_id.clone(), now);
    msg.expires_at = now + policy_of(sub).ttl_secs as i64 * 1000;
    let id = msg.id.clone();
    row.add_message_id(&id);
    let event_id = row.id.clone();
    let answer = published_one(source, row.ce_id.clone(), &id);
    let txn = services.db.begin().await?;
    events::insert_new(&txn, row).await?;
    messages::insert_many(&txn, std::slice::from_ref(&msg)).await?;
    idempotency::keep_answer(&txn, Some(&answer)).await?;
    services.pipeline.commit_and_wake(txn, Due::anything()).await?;
    Ok((event_id, id))
}

/// `since` and `until` as a window, `until` after `since` when both are given.
fn window(since: Option<TimeParam>, until: Option<TimeParam>) -> Result<(Option<i64>, Option<i64>)> {
    let (since_ms, until_ms) = (since.map(|TimeParam(ms)| ms), until.map(|TimeParam(ms)| ms));
    if let (Some(since), Some(until)) = (since_ms, until_ms)
        && since >= until
    {
        return Err(ServiceError::field("until", "must be after since"));
    }
    Ok((since_ms, until_ms))
}

fn summary(row: &event::Model) -> dto::Event {
    dto::Event {
        id: row.ce_id.clone(),
        source: row.source.clone(),
        event_type: row.event_type.clone(),
        published_at: crate::clock::to_utc(row.created_at),
        message_ids: row.message_id_list(),
    }
}

/// A page of the kept events, newest first.
pub async fn list(
    services: &Services,
    who: &Principal,
    q: &EventQuery,
    page: PageRequest,
) -> Result<dto::Page<dto::Event>> {
    let page = list_with_customers(services, who, q, page).await?;
    let data = page.data.into_iter().map(|(_, event)| event).collect();
    Ok(dto::Page { data, next_cursor: page.next_cursor, searched_back_to: page.searched_back_to })
}

/// A page of the kept events, newest first, each with its customer's id.
pub async fn list_with_customers(
    services: &Services,
    who: &Principal,
    q: &EventQuery,
    page: PageRequest,
) -> Result<dto::Page<(CustomerId, dto::Event)>> {
    let (since_ms, until_ms) = window(q.since, q.until)?;
    let filter = EventFilter {
        customer_id: who.customer_filter(text_of(&q.customer_id)),
        source: text_of(&q.source).map(str::to_string),
        event_type: text_of(&q.event_type).map(str::to_string),
        since_ms,
        until_ms,
    };
    let (rows, stop) = events::list(&services.db, &filter, &page).await?;
    let (rows, next_cursor, stop) = page::finish_search(rows, page.limit, |r| &r.id, stop);
    Ok(dto::Page {
        data: rows.iter().map(|r| (r.customer_id.clone(), summary(r))).collect(),
        next_cursor,
        searched_back_to: stop.as_deref().and_then(super::views::time_of_id),
    })
}

/// The kept events with a CloudEvent id (more than one only when their sources differ).
pub async fn with_id(
    services: &Services,
    who: &Principal,
    customer_id: Option<&str>,
    ce_id: &str,
) -> Result<Vec<(CustomerId, dto::Event)>> {
    let customer_id = who.customer_filter(customer_id).ok_or_else(|| {
        ServiceError::field("customer_id", "is required with an event id when the admin searches events")
    })?;
    let found = events::by_ce_id(&services.db, &customer_id, ce_id, None).await?;
    Ok(found.iter().map(|r| (r.customer_id.clone(), summary(r))).collect())
}

/// A kept event by its CloudEvent id (and source, needed only when two kept events share the id).
pub async fn get(
    services: &Services,
    who: &Principal,
    customer_id: Option<&str>,
    ce_id: &str,
    source: Option<&str>,
) -> Result<dto::EventDetail> {
    let customer_id = who.customer_for_write(customer_id)?;
    let source = source.filter(|s| !s.is_empty());
    let mut found = events::by_ce_id(&services.db, &customer_id, ce_id, source).await?;
    if found.len() > 1 {
        return Err(ServiceError::Conflict(
            "more than one kept event has this id: name the one meant with ?source=".into(),
        ));
    }
    let row = found.pop().ok_or(ServiceError::NotFound("event"))?;
    let event = serde_json::from_str(&row.payload).unwrap_or(Value::Null);
    Ok(dto::EventDetail { summary: summary(&row), event })
}
