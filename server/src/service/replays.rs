//! Replays as durable jobs: a window of kept events sent again to a subscription, and the bulk
//! replay of dead messages. Starting one stores the job with its audit row and does its first
//! batch in the same transaction, so a replay of at most one batch (500) is done before the
//! answer; a longer one goes on in the pipeline's runner (`pipeline::replays`), in this process
//! or any other, whether or not its client waits.

use domain::dto;
use domain::ids::{CustomerId, MessageId, ReplayId};
use domain::request::{BulkReplayBody, ReplayWindowBody, Text};
use domain::states::{MessageState, ReplayKind, ReplayState};
use sea_orm::TransactionTrait;
use serde_json::{Value, json};

use super::{Principal, Result, ServiceError, Services, audit, idempotency};
use crate::clock::to_utc;
use crate::ids;
use crate::pipeline::replays::{self as runner, Step};
use crate::store::entities::replay;
use crate::store::{processes, replays, subscriptions};

/// The longest window a replay covers.
const MAX_WINDOW_MS: i64 = 366 * 86_400_000;

/// Starts replaying every kept event published in `[since, until)` that the subscription accepts
/// (narrowed by `event_types` and `source`): each gets a new message for it, with a new id, a
/// fresh attempt budget and TTL, whether or not it had one before.
pub async fn start_events(services: &Services, who: &Principal, body: ReplayWindowBody) -> Result<dto::ReplayStarted> {
    who.require_writer()?;
    let (since_ms, until_ms) = (body.since.ms, body.until.ms);
    if since_ms >= until_ms {
        return Err(ServiceError::field("until", "must be after since"));
    }
    if until_ms - since_ms > MAX_WINDOW_MS {
        return Err(ServiceError::field("until", "the window is at most 366 days"));
    }
    // A window ends when the job starts at the latest (with the events of that millisecond):
    // events published later have messages of their own, and the job's end is then known.
    let end = services.now_ms() + 1;
    let until = if until_ms > end { to_utc(end).to_rfc3339() } else { body.until.text };
    let sub = subscriptions::get(&services.db, &body.subscription_id)
        .await?
        .filter(|s| who.sees(&s.customer_id))
        .ok_or(ServiceError::NotFoundField { field: "subscription_id", what: "subscription" })?;
    let mut request = json!({"subscription_id": sub.id, "since": body.since.text, "until": until});
    if let Some(types) = body.event_types {
        request["event_types"] = json!(types.0);
    }
    if let Some(Text(source)) = body.source {
        request["source"] = json!(source);
    }
    let start =
        Start { kind: ReplayKind::Events, customer_id: Some(sub.customer_id), request, target: sub.id.to_string() };
    start_job(services, who, start).await
}

/// Starts replaying every dead message that matches the filter (the caller's own, for a customer).
pub async fn start_messages(services: &Services, who: &Principal, body: BulkReplayBody) -> Result<dto::ReplayStarted> {
    who.require_writer()?;
    let customer_id = who.customer_filter(body.customer_id.as_deref());
    // The request as the job reads it again as it goes on: a customer's own id in place of any other.
    let mut request = json!({
        "customer_id": customer_id, "subscription_id": body.subscription_id,
        "state": MessageState::Dead, "event_type": body.event_type.map(|Text(t)| t),
        "since": body.since.map(|t| t.text), "until": body.until.map(|t| t.text),
    });
    if let Some(fields) = request.as_object_mut() {
        fields.retain(|_, v| !v.is_null());
    }
    let start = Start { kind: ReplayKind::Messages, customer_id, request, target: "messages".into() };
    start_job(services, who, start).await
}

/// Starts replaying the dead messages an endpoint's failure group lists.
pub async fn start_listed(
    services: &Services,
    who: &Principal,
    (customer_id, endpoint_id): (CustomerId, &str),
    failure: &str,
    ids: Vec<MessageId>,
) -> Result<dto::ReplayStarted> {
    who.require_writer()?;
    let request = json!({"state": "dead", "endpoint_id": endpoint_id, "failure": failure, runner::LISTED: ids});
    let start =
        Start { kind: ReplayKind::Messages, customer_id: Some(customer_id), request, target: endpoint_id.into() };
    start_job(services, who, start).await
}

/// A job about to be stored.
struct Start {
    kind: ReplayKind,
    /// Whose events or messages; `None`: every customer's (the admin's bulk replay).
    customer_id: Option<CustomerId>,
    request: Value,
    /// The audit row's object: the subscription of a window, `messages` for a bulk replay.
    target: String,
}

/// Stores the job, its audit row and its first batch in one transaction; the runner is woken
/// for the rest.
async fn start_job(services: &Services, who: &Principal, start: Start) -> Result<dto::ReplayStarted> {
    let p = &services.pipeline;
    let now = services.now_ms();
    let token = processes::lease_token(p.process);
    let row = replay::Model {
        id: ids::new(),
        customer_id: start.customer_id.clone(),
        kind: start.kind,
        state: ReplayState::Running,
        request: start.request.to_string(),
        replayed: 0,
        cursor: None,
        lease_token: Some(token),
        lease_until: runner::lease_until(now),
        created_at: now,
        updated_at: now,
        finished_at: None,
    };
    let txn = services.db.begin().await?;
    replays::insert(&txn, row.clone()).await?;
    let Step::Done { due, last, .. } = runner::step(p, &txn, &row, token, runner::FIRST_BATCH).await? else {
        return Err(ServiceError::Conflict("the replay could not start; try again".into()));
    };
    if !last {
        // Any process's runner goes on with it at once, this one's first (woken below).
        replays::release_leases_of(&txn, &row.id).await?;
    }
    let job = replays::get(&txn, &row.id).await?.ok_or(ServiceError::NotFound("replay"))?;
    let mut detail = shown(start.request);
    detail["replay_id"] = json!(job.id);
    if last {
        detail["replayed"] = json!(job.replayed);
    }
    let action = match start.kind {
        ReplayKind::Events => "events.replay",
        ReplayKind::Messages => "messages.replay",
    };
    audit::record(&txn, services, who, action, &start.target, start.customer_id.as_ref(), detail).await?;
    let started = dto::ReplayStarted { replay_id: job.id.to_string(), state: job.state, replayed: job.replayed as u64 };
    idempotency::keep_answer(&txn, Some(&started)).await?;
    p.commit_and_wake(txn, due).await?;
    if !last {
        p.replay_wake.notify_one();
    }
    Ok(started)
}

/// The job, for the admin or the customer whose events or messages it replays.
pub async fn get(services: &Services, who: &Principal, id: &ReplayId) -> Result<dto::Replay> {
    Ok(view(visible(services, who, id).await?))
}

async fn visible(services: &Services, who: &Principal, id: &ReplayId) -> Result<replay::Model> {
    let job = replays::get(&services.db, id).await?;
    job.filter(|j| match (who.own_customer(), &j.customer_id) {
        (None, _) => true,
        (Some(customer_id), Some(owner)) => customer_id == owner,
        (Some(_), None) => false,
    })
    .ok_or(ServiceError::NotFound("replay"))
}

/// Cancels a running job: what it replayed stays, and it replays nothing more. 409 once it ended.
pub async fn cancel(services: &Services, who: &Principal, id: &ReplayId) -> Result<dto::Replay> {
    who.require_writer()?;
    let job = visible(services, who, id).await?;
    let txn = services.db.begin().await?;
    if !replays::finish(&txn, &job.id, ReplayState::Cancelled, services.now_ms()).await? {
        let state = replays::get(&txn, &job.id).await?.map_or(job.state, |now| now.state);
        return Err(ServiceError::Conflict(format!("the replay is {state}: there is nothing to cancel")));
    }
    let cancelled = replays::get(&txn, &job.id).await?.ok_or(ServiceError::NotFound("replay"))?;
    let detail = json!({"replayed": cancelled.replayed});
    audit::record(&txn, services, who, "replay.cancel", &job.id, job.customer_id.as_ref(), detail).await?;
    idempotency::commit_answering(txn, view(cancelled)).await
}

/// A request as the job and its audit row show it: the messages it lists counted, not listed.
fn shown(mut request: Value) -> Value {
    if let Some(listed) = request.as_object_mut().and_then(|fields| fields.remove(runner::LISTED)) {
        request["messages"] = json!(listed.as_array().map_or(0, Vec::len));
    }
    request
}

pub fn view(row: replay::Model) -> dto::Replay {
    dto::Replay {
        id: row.id.to_string(),
        kind: row.kind,
        state: row.state,
        replayed: row.replayed as u64,
        request: shown(serde_json::from_str(&row.request).unwrap_or(Value::Null)),
        created_at: to_utc(row.created_at),
        finished_at: row.finished_at.map(to_utc),
    }
}
