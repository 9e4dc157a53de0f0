//! Publishing: parsing, who may publish for whom, and the test event (the
//! events and their messages are written by the intake, by group commit); the
//! archive of kept events, and the replay of a time window of it.

use domain::dto;
use domain::event::CloudEvent;
use domain::ids::{CustomerId, EventId, MessageId, SubscriptionId};
use domain::operational;
use domain::query::{EventQuery, TimeParam, text_of};
use domain::request::ReplayWindowBody;
use sea_orm::TransactionTrait;
use serde_json::{Value, json};

use super::{Principal, Result, ServiceError, Services, audit};
use crate::ids::{self, new_id};
use crate::pipeline::Due;
use crate::store::entities::{event, message};
use crate::store::events::EventFilter;
use crate::store::messages::{message_for, pending_message};
use crate::store::page::{self, PageRequest};
use crate::store::subscriptions::{event_types, policy_of};
use crate::store::{customers, events, messages, subscriptions};

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
    if events_in.is_empty() {
        // An empty batch is valid, and stores nothing.
        return Ok(dto::PublishResult { events: Vec::new() });
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
pub async fn send_test(services: &Services, who: &Principal, subscription_id: &SubscriptionId) -> Result<MessageId> {
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
        id: ids::new(),
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
    messages::insert_many(&txn, std::slice::from_ref(&msg)).await?;
    services.pipeline.commit_and_wake(txn, Due::anything()).await?;
    Ok(id)
}

/// The longest window a replay covers.
const MAX_WINDOW_MS: i64 = 366 * 86_400_000;
/// Events read, and messages written, per transaction of a replay.
const REPLAY_BATCH: u64 = 500;

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

/// Gives every kept event published in `[since, until)` that the subscription
/// accepts (narrowed by `event_types` and `source`) a new message for it: a new
/// id, a fresh attempt budget and TTL, whether or not it had one before. Written
/// a few hundred at a time, each batch in its own transaction.
pub async fn replay_window(services: &Services, who: &Principal, body: ReplayWindowBody) -> Result<dto::ReplayResult> {
    let (since, until) = (body.since.text, body.until.text);
    let (since_ms, until_ms) = (body.since.ms, body.until.ms);
    if since_ms >= until_ms {
        return Err(ServiceError::field("until", "must be after since"));
    }
    if until_ms - since_ms > MAX_WINDOW_MS {
        return Err(ServiceError::field("until", "the window is at most 366 days"));
    }
    let only_types = body.event_types.map(|types| types.0);
    let source = body.source.map(|source| source.0);
    let sub = subscriptions::get(&services.db, &body.subscription_id)
        .await?
        .filter(|s| who.sees(&s.customer_id))
        .ok_or(ServiceError::NotFoundField { field: "subscription_id", what: "subscription" })?;
    let listed = event_types(&sub.event_types);
    let accepts = |event_type: &str| {
        listed.iter().any(|t| operational::type_matches(t, event_type))
            && only_types.as_ref().is_none_or(|only| only.iter().any(|t| t == event_type))
    };
    let ttl_ms = policy_of(&sub).ttl_secs as i64 * 1000;
    let filter = EventFilter {
        customer_id: Some(sub.customer_id.clone()),
        source: source.clone(),
        event_type: None,
        since_ms: Some(since_ms),
        until_ms: Some(until_ms),
    };
    let mut replayed = 0u64;
    let mut after: Option<EventId> = None;
    loop {
        let batch = events::oldest_first(&services.db, &filter, after.as_ref(), REPLAY_BATCH).await?;
        let Some(last) = batch.last() else { break };
        after = Some(last.id.clone());
        let now = services.now_ms();
        let new_messages: Vec<message::Model> =
            batch.iter().filter(|e| accepts(&e.event_type)).map(|e| message_for(e, &sub, ttl_ms, now)).collect();
        if !new_messages.is_empty() {
            let listed: Vec<(EventId, MessageId)> =
                new_messages.iter().map(|m| (m.event_id.clone(), m.id.clone())).collect();
            replayed += new_messages.len() as u64;
            let txn = services.db.begin().await?;
            messages::insert_many(&txn, &new_messages).await?;
            events::add_message_ids(&txn, &listed).await?;
            services.pipeline.commit_and_wake(txn, Due::first_attempts_of(sub.endpoint_id.clone())).await?;
        }
        if (batch.len() as u64) < REPLAY_BATCH {
            break;
        }
    }
    let mut detail = json!({"since": since, "until": until, "replayed": replayed});
    if let Some(types) = only_types {
        detail["event_types"] = json!(types);
    }
    if let Some(source) = source {
        detail["source"] = json!(source);
    }
    let txn = services.db.begin().await?;
    audit::record(&txn, services, who, "events.replay", &sub.id, Some(&sub.customer_id), detail).await?;
    txn.commit().await?;
    Ok(dto::ReplayResult { replayed })
}
