//! Replay jobs. A job (stored by its request, see `service::replays`) replays a window of kept
//! events to a subscription, or dead messages, in id order, one batch per transaction: the
//! batch's messages and the job's progress (its cursor, the last id done, and its count) commit
//! together, and only while this process holds the job's lease, so a job resumed after a crash,
//! here or in another process, goes on exactly where it stopped and replays nothing twice.
//!
//! Each process runs one job at a time, in short batches, and rests between batches one and a half
//! times as long as the batch took, so that a long replay takes at most two fifths of the
//! database's time from the live traffic. A batch reads at most its size in rows, whatever its
//! filters pass over.

use std::time::{Duration, Instant};

use domain::filter::Message;
use domain::ids::{EventId, MessageId};
use domain::operational::type_matches;
use domain::request::{BulkReplayBody, ReadBody, ReplayWindowBody};
use domain::states::{MessageState, ReplayKind, ReplayState};
use sea_orm::{DatabaseTransaction, DbErr, TransactionTrait};
use serde_json::Value;
use tokio::sync::watch;

use super::{Due, Pipeline, StoredFilter};
use crate::ids::{ID_AFTER_CREATION_MS, first_id_at};
use crate::store::entities::{event, message, replay, subscription};
use crate::store::events::EventFilter;
use crate::store::messages::{MessageFilter, message_for};
use crate::store::replays::{self, Advance};
use crate::store::subscriptions::{event_types, policy_of};
use crate::store::{events, messages, processes, subscriptions};

/// Events read, or dead messages replayed, in a job's first batch, done with the request that
/// starts it: a job this small is done before the answer.
pub const FIRST_BATCH: u64 = 500;
/// The same in the runner's batches: short transactions, which live traffic never waits long behind.
const RUN_BATCH: u64 = 100;
/// The runner rests `REST_PER_WORK.0 / REST_PER_WORK.1` times as long as its batch took.
const REST_PER_WORK: (u32, u32) = (3, 2);
/// How long a job stays with the process working on it without a batch done.
const LEASE_MS: i64 = 15_000;
/// How often an idle runner looks for jobs without being woken (another process's, or one
/// whose process stopped).
const IDLE_POLL: Duration = Duration::from_secs(1);

/// The end of a lease taken at `now_ms`.
pub fn lease_until(now_ms: i64) -> i64 {
    now_ms + LEASE_MS
}

/// What one batch did.
pub enum Step {
    /// The batch is in the transaction: commit it with `Pipeline::commit_and_wake(txn, due)`.
    /// The job's cursor is now `cursor`; it is done when `last`.
    Done { due: Due, last: bool, cursor: Option<String> },
    /// The job is no longer this lease's (cancelled, or taken over): roll the batch back.
    Lost,
    /// The job cannot go on (its subscription was deleted): it is marked failed in the transaction.
    Failed,
}

/// Replays the job's next batch of at most `size` in `txn`, holding its lease with `token`, and
/// records the progress.
pub async fn step(
    p: &Pipeline,
    txn: &DatabaseTransaction,
    job: &replay::Model,
    token: i64,
    size: u64,
) -> Result<Step, DbErr> {
    replays::plan_each_time(txn).await?;
    let now = p.now_ms();
    let request: Value = serde_json::from_str(&job.request).unwrap_or(Value::Null);
    let done = match job.kind {
        ReplayKind::Events => {
            let Some(window) = EventWindow::of(txn, &request).await? else {
                replays::finish(txn, &job.id, ReplayState::Failed, now).await?;
                return Ok(Step::Failed);
            };
            window.next_batch(txn, job.cursor.as_deref(), size, now).await?
        }
        ReplayKind::Messages => {
            let Some(filter) = dead_messages(job, &request) else {
                replays::finish(txn, &job.id, ReplayState::Failed, now).await?;
                return Ok(Step::Failed);
            };
            next_dead_batch(txn, &filter, job.cursor.as_deref(), size, now).await?
        }
    };
    let last = done.read < size as usize;
    let cursor = done.cursor.or_else(|| job.cursor.clone());
    let advance =
        Advance { added: done.replayed, cursor: cursor.clone(), last, now_ms: now, lease_until: lease_until(now) };
    if !replays::advance(txn, &job.id, token, &advance).await? {
        return Ok(Step::Lost);
    }
    Ok(Step::Done { due: done.due, last, cursor })
}

/// One batch's work.
struct Batch {
    /// How many events or messages it read (fewer than asked: the selection is exhausted).
    read: usize,
    replayed: u64,
    /// The last id it read.
    cursor: Option<String>,
    due: Due,
}

/// A window of events replayed to one subscription.
struct EventWindow {
    sub: subscription::Model,
    /// The customer's events of the window, in id order; the source is checked row by row, so
    /// that a batch reads at most its size in rows.
    filter: EventFilter,
    source: Option<String>,
    only_types: Option<Vec<String>>,
    /// Where the window's ids begin: ids are made after the time stored beside them.
    first_id: EventId,
}

impl EventWindow {
    /// The window its request names; `None` once its subscription is gone.
    async fn of(txn: &DatabaseTransaction, request: &Value) -> Result<Option<EventWindow>, DbErr> {
        let Ok(body) = ReplayWindowBody::read(request) else { return Ok(None) };
        let Some(sub) = subscriptions::get(txn, &body.subscription_id).await? else { return Ok(None) };
        let filter = EventFilter {
            customer_id: Some(sub.customer_id.clone()),
            source: None,
            event_type: None,
            since_ms: Some(body.since.ms),
            until_ms: Some(body.until.ms),
        };
        let first_id = EventId::from(first_id_at("evt", body.since.ms - ID_AFTER_CREATION_MS));
        let (source, only_types) = (body.source.map(|source| source.0), body.event_types.map(|types| types.0));
        Ok(Some(EventWindow { sub, filter, source, only_types, first_id }))
    }

    /// A new message for each event of the next batch the subscription accepts.
    async fn next_batch(
        &self,
        txn: &DatabaseTransaction,
        cursor: Option<&str>,
        size: u64,
        now: i64,
    ) -> Result<Batch, DbErr> {
        let after = cursor.map_or_else(|| self.first_id.clone(), EventId::from);
        let batch = events::oldest_first(txn, &self.filter, Some(&after), size).await?;
        let listed = event_types(&self.sub.event_types);
        let stored_filter = self.sub.filter.as_deref().map(StoredFilter::compile);
        let accepts = |row: &&event::Model| {
            let event_type = row.event_type.as_str();
            listed.iter().any(|t| type_matches(t, event_type))
                && self.source.as_ref().is_none_or(|source| *source == row.source)
                && self.only_types.as_ref().is_none_or(|only| only.iter().any(|t| type_matches(t, event_type)))
                && stored_filter.as_ref().is_none_or(|f| row.cloud_event().is_some_and(|e| f.matches(&Message::of(&e))))
        };
        let ttl_ms = policy_of(&self.sub).ttl_secs as i64 * 1000;
        let new_messages: Vec<message::Model> =
            batch.iter().filter(accepts).map(|e| message_for(e, &self.sub, ttl_ms, now)).collect();
        if !new_messages.is_empty() {
            let listed: Vec<(EventId, MessageId)> =
                new_messages.iter().map(|m| (m.event_id.clone(), m.id.clone())).collect();
            messages::insert_many(txn, &new_messages).await?;
            events::add_message_ids(txn, &listed).await?;
        }
        Ok(Batch {
            read: batch.len(),
            replayed: new_messages.len() as u64,
            cursor: batch.last().map(|e| e.id.to_string()),
            due: Due::first_attempts_of(self.sub.endpoint_id.clone()),
        })
    }
}

/// The dead messages a replay's request selects, of the job's customer (or every customer's): a
/// bulk replay's filter, or the messages an endpoint's failure group listed (`message_ids`);
/// `None` when the request no longer reads (the job cannot go on).
fn dead_messages(job: &replay::Model, request: &Value) -> Option<MessageFilter> {
    let base =
        MessageFilter { customer_id: job.customer_id.clone(), state: Some(MessageState::Dead), ..Default::default() };
    if let Some(listed) = request.get(LISTED) {
        let ids: Vec<String> = serde_json::from_value(listed.clone()).ok()?;
        return Some(MessageFilter { ids: Some(ids.into_iter().map(MessageId::from).collect()), ..base });
    }
    let body = BulkReplayBody::read(request).ok()?;
    Some(MessageFilter {
        subscription_id: body.subscription_id,
        event_type: body.event_type.map(|t| t.0),
        since_ms: body.since.map(|t| t.ms),
        until_ms: body.until.map(|t| t.ms),
        ..base
    })
}

/// The field of a job's request that lists the messages it replays, when it names them.
pub const LISTED: &str = "message_ids";

/// Replays the next batch of dead messages after the cursor.
async fn next_dead_batch(
    txn: &DatabaseTransaction,
    filter: &MessageFilter,
    cursor: Option<&str>,
    size: u64,
    now: i64,
) -> Result<Batch, DbErr> {
    let after = cursor.map(MessageId::from);
    let ids = messages::ids_after(txn, filter, after.as_ref(), size).await?;
    let read = ids.len();
    let cursor = ids.last().map(ToString::to_string);
    let replayed = if ids.is_empty() { 0 } else { messages::replay(txn, filter, Some(ids), now).await? };
    Ok(Batch { read, replayed, cursor, due: Due::anything_if(replayed > 0) })
}

/// Works on jobs until shutdown: one at a time, woken when one is stored, and looking every
/// second for those no process holds.
pub async fn run(p: Pipeline, mut shutdown: watch::Receiver<bool>) {
    while !*shutdown.borrow() {
        if !p.health.is_down() {
            match next_job(&p).await {
                Ok(Some((job, token))) => {
                    work(&p, job, token, &mut shutdown).await;
                    continue;
                }
                Ok(None) => {}
                Err(e) => p.health.failed("looking for replay jobs", &e),
            }
        }
        tokio::select! {
            _ = p.replay_wake.notified() => {}
            _ = tokio::time::sleep(IDLE_POLL) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// Leases the next job no process holds and does one batch of it: whether there was one. Tests
/// drive jobs with this and a manual clock.
pub async fn work_one_batch(p: &Pipeline) -> Result<bool, DbErr> {
    let Some((job, token)) = next_job(p).await? else { return Ok(false) };
    let cursor = one_batch(p, &job, token).await?;
    if cursor.is_some() {
        replays::release_leases_of(&p.db, &job.id).await?;
    }
    Ok(true)
}

async fn next_job(p: &Pipeline) -> Result<Option<(replay::Model, i64)>, DbErr> {
    let running = replays::running(&p.db).await?;
    metrics::gauge!("herald_replays_running").set(running as f64);
    if running == 0 {
        return Ok(None);
    }
    let token = processes::lease_token(p.process);
    let now = p.now_ms();
    let txn = p.db.begin().await?;
    let job = replays::lease_next(&txn, token, now, lease_until(now)).await?;
    txn.commit().await?;
    if job.is_some() {
        // A long job follows a large archive, perhaps loaded since anything last analyzed it.
        replays::analyze_unless_autovacuum(&p.db).await?;
    }
    Ok(job.map(|job| (job, token)))
}

/// Batches of one job until it ends, is lost, or the process stops (its lease then lets
/// another process, or this one after a restart, go on).
async fn work(p: &Pipeline, mut job: replay::Model, token: i64, shutdown: &mut watch::Receiver<bool>) {
    while !*shutdown.borrow() {
        let started = Instant::now();
        match one_batch(p, &job, token).await {
            Ok(Some(cursor)) => job.cursor = cursor,
            Ok(None) => return,
            Err(e) => {
                p.health.failed("replaying a batch (the job goes on from its last batch)", &e);
                return;
            }
        }
        let rest = started.elapsed() * REST_PER_WORK.0 / REST_PER_WORK.1;
        tokio::select! {
            _ = tokio::time::sleep(rest) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// One batch, committed: the job's new cursor, or `None` once the job is over for this process.
async fn one_batch(p: &Pipeline, job: &replay::Model, token: i64) -> Result<Option<Option<String>>, DbErr> {
    let txn = p.db.begin().await?;
    match step(p, &txn, job, token, RUN_BATCH).await? {
        Step::Done { due, last, cursor } => {
            p.commit_and_wake(txn, due).await?;
            Ok((!last).then_some(cursor))
        }
        Step::Lost => {
            txn.rollback().await?;
            Ok(None)
        }
        Step::Failed => {
            txn.commit().await?;
            Ok(None)
        }
    }
}
