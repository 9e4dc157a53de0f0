//! The delivery log: listing, one message with its attempts, and replay.

use domain::dto;
use domain::ids::{MessageId, SubscriptionId};
use domain::query::{MessageQuery, TimeParam, text_of};
use sea_orm::{DatabaseTransaction, TransactionTrait};
use serde_json::{Value, json};

use super::Services;
use super::{Principal, Result, ServiceError, audit, idempotency, views};
use crate::pipeline::Due;
use crate::store::messages::MessageFilter;
use crate::store::page::{self, PageRequest};
use crate::store::{attempts, events, messages};

/// The delivery log's filter that a query asks for, within what `who` may see.
fn filter(who: &Principal, q: &MessageQuery) -> MessageFilter {
    MessageFilter {
        ids: None,
        customer_id: who.customer_filter(text_of(&q.customer_id)),
        subscription_id: text_of(&q.subscription_id).map(SubscriptionId::from),
        state: q.state,
        event_type: text_of(&q.event_type).map(str::to_string),
        since_ms: q.since.map(|TimeParam(ms)| ms),
        until_ms: q.until.map(|TimeParam(ms)| ms),
    }
}

pub async fn list(
    services: &Services,
    who: &Principal,
    q: &MessageQuery,
    page: PageRequest,
) -> Result<dto::Page<dto::Message>> {
    let mut filter = filter(who, q);
    if let Some(ce_id) = text_of(&q.event_id) {
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
    let mut starts = messages::series_starts(&services.db, &row.id).await?;
    starts.push(row.attempt_base.max(0) as u32);
    Ok(dto::MessageDetail {
        message: views::message(row),
        event: event.and_then(|e| serde_json::from_str(&e.payload).ok()).unwrap_or(Value::Null),
        attempts: views::attempts_in_series(tries, starts),
    })
}

/// Replays one dead or delivered message: due now, same id, attempts kept.
pub async fn replay_one(services: &Services, who: &Principal, id: &MessageId) -> Result<dto::Message> {
    who.require_writer()?;
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
    let txn = services.db.begin().await?;
    if replay_in(services, &txn, &only_this, Some(vec![row.id.clone()]), change).await? == 0 {
        return Err(ServiceError::Conflict(format!(
            "a {} message cannot be replayed; only dead or delivered ones",
            row.state
        )));
    }
    let row = messages::get(&txn, id).await?.ok_or(ServiceError::NotFound("message"))?;
    let replayed = views::message(row);
    idempotency::keep_answer(&txn, Some(&replayed)).await?;
    services.pipeline.commit_and_wake(txn, Due::anything()).await?;
    Ok(replayed)
}

/// A replay as its audit row tells it.
struct Change<'a> {
    pub who: &'a Principal,
    pub action: &'static str,
    pub target: &'a str,
    pub detail: Value,
}

/// Replays in `txn`, with the audit row when anything was replayed: how many.
async fn replay_in(
    services: &Services,
    txn: &DatabaseTransaction,
    filter: &MessageFilter,
    ids: Option<Vec<MessageId>>,
    change: Change<'_>,
) -> Result<u64> {
    let replayed = messages::replay(txn, filter, ids, services.now_ms()).await?;
    if replayed > 0 {
        let mut detail = change.detail;
        detail["replayed"] = replayed.into();
        let customer_id = filter.customer_id.as_ref();
        audit::record(txn, services, change.who, change.action, change.target, customer_id, detail).await?;
    }
    Ok(replayed)
}
