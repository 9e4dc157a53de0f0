//! The delivery log: listing, one message with its attempts, and replay.

use chrono::DateTime;
use domain::dto;
use domain::ids::{MessageId, SubscriptionId};
use domain::request::BulkReplayBody;
use domain::states::MessageState;
use sea_orm::TransactionTrait;
use serde_json::{Value, json};

use super::Services;
use super::{Principal, Result, ServiceError, audit, views};
use crate::store::messages::MessageFilter;
use crate::store::page::{self, PageRequest};
use crate::store::{attempts, events, messages, notify};

/// The list's query parameters, as received.
#[derive(Debug, Default, Clone, serde::Deserialize, serde::Serialize)]
pub struct ListQuery {
    /// The CloudEvent id of the event whose messages to list.
    pub event_id: Option<String>,
    pub customer_id: Option<String>,
    pub subscription_id: Option<String>,
    pub state: Option<String>,
    pub event_type: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
}

pub(super) fn parse_time(field: &str, value: Option<&str>) -> Result<Option<i64>> {
    match value.filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(text) => DateTime::parse_from_rfc3339(text)
            .map(|t| Some(t.timestamp_millis()))
            .map_err(|_| ServiceError::field(field, "must be an RFC 3339 time like 2026-01-31T12:00:00Z")),
    }
}

fn filter(who: &Principal, q: &ListQuery) -> Result<MessageFilter> {
    let state = match q.state.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => Some(
            MessageState::parse(s)
                .ok_or_else(|| ServiceError::field("state", "must be pending, delivering, delivered, held or dead"))?,
        ),
    };
    Ok(MessageFilter {
        ids: None,
        customer_id: who.customer_filter(q.customer_id.as_deref()),
        subscription_id: q.subscription_id.as_deref().filter(|s| !s.is_empty()).map(SubscriptionId::from),
        state,
        event_type: q.event_type.clone().filter(|s| !s.is_empty()),
        since_ms: parse_time("since", q.since.as_deref())?,
        until_ms: parse_time("until", q.until.as_deref())?,
    })
}

pub async fn list(
    services: &Services,
    who: &Principal,
    q: &ListQuery,
    page: PageRequest,
) -> Result<dto::Page<dto::Message>> {
    let mut filter = filter(who, q)?;
    if let Some(ce_id) = q.event_id.as_deref().filter(|id| !id.is_empty()) {
        // An event is found by its id within one customer's events (their unique key's index).
        let customer_id = filter.customer_id.clone().ok_or_else(|| {
            ServiceError::field("customer_id", "is required with event_id when the admin lists messages")
        })?;
        let found = events::by_ce_id(&services.db, &customer_id, ce_id, None).await?;
        filter.ids = Some(found.iter().flat_map(|e| e.message_id_list()).map(MessageId::from).collect());
    }
    let (rows, stop) = messages::list(&services.db, &filter, &page).await?;
    let (rows, next_cursor, stop) = page::finish_search(rows, page.limit, |r| &r.id, stop);
    Ok(dto::Page {
        data: rows.into_iter().map(views::message).collect(),
        next_cursor,
        searched_back_to: stop.as_deref().and_then(views::time_of_id),
    })
}

pub async fn detail(services: &Services, who: &Principal, id: &MessageId) -> Result<dto::MessageDetail> {
    let row = messages::get(&services.db, id)
        .await?
        .filter(|m| who.sees(&m.customer_id))
        .ok_or(ServiceError::NotFound("message"))?;
    let event = events::get(&services.db, &row.event_id).await?;
    let tries = attempts::for_message(&services.db, &row.id).await?;
    Ok(dto::MessageDetail {
        message: views::message(row),
        event: event.and_then(|e| serde_json::from_str(&e.payload).ok()).unwrap_or(Value::Null),
        attempts: tries.into_iter().map(views::attempt).collect(),
    })
}

/// Replays one dead or delivered message: due now, same id, attempts kept.
pub async fn replay_one(services: &Services, who: &Principal, id: &MessageId) -> Result<dto::Message> {
    let row = messages::get(&services.db, id)
        .await?
        .filter(|m| who.sees(&m.customer_id))
        .ok_or(ServiceError::NotFound("message"))?;
    if events::get(&services.db, &row.event_id).await?.is_none() {
        return Err(ServiceError::Conflict(
            "the message's event is no longer kept (retention.events_secs): there is nothing to send".into(),
        ));
    }
    let only_this = MessageFilter { customer_id: Some(row.customer_id.clone()), ..MessageFilter::default() };
    let change = Change { who, action: "message.replay", target: &row.id, detail: json!({"event_id": row.event_id}) };
    if replay(services, &only_this, Some(vec![row.id.clone()]), change).await? == 0 {
        return Err(ServiceError::Conflict(format!(
            "a {} message cannot be replayed; only dead or delivered ones",
            row.state
        )));
    }
    services.pipeline.wake.notify_one();
    let row = messages::get(&services.db, id).await?.ok_or(ServiceError::NotFound("message"))?;
    Ok(views::message(row))
}

/// Replays every dead message that matches the filter.
pub async fn replay_bulk(services: &Services, who: &Principal, body: &Value) -> Result<dto::ReplayResult> {
    let body = BulkReplayBody::read(body)?;
    let q = ListQuery {
        event_id: None,
        customer_id: body.customer_id.map(|id| id.0),
        subscription_id: body.subscription_id.map(|id| id.0),
        state: Some(MessageState::Dead.as_str().to_string()),
        event_type: body.event_type.map(|t| t.0),
        since: body.since.map(|t| t.text),
        until: body.until.map(|t| t.text),
    };
    let filter = filter(who, &q)?;
    let mut detail = serde_json::to_value(&q).unwrap_or_default();
    if let Some(fields) = detail.as_object_mut() {
        fields.retain(|_, v| !v.is_null());
    }
    let change = Change { who, action: "messages.replay", target: "messages", detail };
    let replayed = replay(services, &filter, None, change).await?;
    if replayed > 0 {
        services.pipeline.wake.notify_one();
    }
    Ok(dto::ReplayResult { replayed })
}

/// A replay as its audit row tells it.
pub(super) struct Change<'a> {
    pub who: &'a Principal,
    pub action: &'static str,
    pub target: &'a str,
    pub detail: Value,
}

/// Replays in one transaction that also writes the audit row (when anything
/// was replayed) and wakes other instances at commit.
pub(super) async fn replay(
    services: &Services,
    filter: &MessageFilter,
    ids: Option<Vec<MessageId>>,
    change: Change<'_>,
) -> Result<u64> {
    let txn = services.db.begin().await?;
    let replayed = messages::replay(&txn, filter, ids, services.now_ms()).await?;
    if replayed > 0 {
        let mut detail = change.detail;
        detail["replayed"] = replayed.into();
        let customer_id = filter.customer_id.as_ref();
        audit::record(&txn, services, change.who, change.action, change.target, customer_id, detail).await?;
        notify::send(&txn, services.pipeline.wake.origin()).await?;
    }
    txn.commit().await?;
    Ok(replayed)
}
