//! Writes the ends of attempts, many per transaction (group commit): each
//! message's next state (guarded by its lease), the attempt rows, and each
//! endpoint's circuit once per batch — whose transitions hold or release the
//! endpoint's other messages. A lone attempt is written at once; under load,
//! the attempts that finish while a batch is being written form the next one.
//!
//! On PostgreSQL a few recorders run side by side, each for its share of the
//! endpoints: within a process their batches then never wait for each other's
//! locks on an endpoint's circuit, and the attempts of one busy endpoint gather
//! into large batches instead of being spread over small ones that take turns
//! at its lock. The price: a batch that waits (for another process's lock on a
//! circuit, say) holds up the other endpoints of its recorder meanwhile.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use domain::ids::{CustomerId, EndpointId, MessageId, SubscriptionId};
use foldhash::HashSet;

use domain::breaker::{Circuit, Transition};
use domain::operational::{EndpointReport, PAUSED_GONE, PausedReport, Report, announced};
use domain::states::{EndpointState, MessageState, Outcome};
use sea_orm::{DatabaseTransaction, DbErr, TransactionTrait};
use tokio::sync::{mpsc, oneshot};

use super::Pipeline;
use super::decide::Decision;
use super::group_commit::{self, BatchLimit};
use super::operational::{Announced, report, report_dead, report_endpoints};
use super::send::http::{Received, headers_json};
use crate::store::endpoints::{circuit_of, lock_many, lock_many_direct, save_circuits, save_circuits_direct};
use crate::store::entities::{attempt, endpoint, message};
use crate::store::messages::{End, PAUSED};
use crate::store::sqlite_direct::{self, Direct};
use crate::store::{self, audit, messages};

/// The most attempts written in one transaction.
const MAX_BATCH: usize = 256;

/// Recorders on PostgreSQL, each writing one batch at a time, well inside the pool
/// of 16 that the lanes and the API share; SQLite, with one writer, has one. Also
/// the stride of the processes' rows in the per-minute attempt counts (a row per
/// recorder), on either database, so that no two recorders update the same row.
const POSTGRES_RECORDERS: usize = 4;

/// One finished attempt, as the worker hands it over.
pub struct AttemptRecord {
    pub message: message::Model,
    pub started_at: i64,
    /// As [`headers_json`] writes them.
    pub request_headers: String,
    /// The trace the request carried (lower-case hex); `None` when no request was sent.
    pub trace_id: Option<String>,
    pub received: Received,
    pub decision: Decision,
    /// Whether the endpoint's circuit counts this attempt (not when Herald itself failed it).
    pub charged: bool,
}

/// `None` when the lease was lost to another worker (nothing was written for
/// that attempt); otherwise the circuit's transition at this attempt.
pub type Recorded = Result<Option<Transition>, String>;

struct Pending {
    record: AttemptRecord,
    reply: oneshot::Sender<Recorded>,
}

#[derive(Clone)]
pub struct Recorder {
    /// A queue per recorder; an endpoint's attempts always go to the same one.
    queues: Arc<[mpsc::UnboundedSender<Pending>]>,
}

impl Recorder {
    pub fn spawn(pipeline: Pipeline) -> Recorder {
        let recorders = if store::is_postgres(&pipeline.db) { POSTGRES_RECORDERS } else { 1 };
        let queues = (0..recorders)
            .map(|recorder| {
                let (queue, incoming) = mpsc::unbounded_channel();
                tokio::spawn(run(pipeline.clone(), incoming, recorder));
                queue
            })
            .collect();
        Recorder { queues }
    }

    pub async fn record(&self, record: AttemptRecord) -> Recorded {
        let queue = &self.queues[recorder_of(&record.message.endpoint_id, self.queues.len())];
        let (reply, answer) = oneshot::channel();
        queue.send(Pending { record, reply }).map_err(|_| "the recorder has stopped".to_string())?;
        answer.await.map_err(|_| "the recorder dropped the attempt".to_string())?
    }
}

/// The recorder, of `recorders`, that writes the attempts of `endpoint`.
fn recorder_of(endpoint: &EndpointId, recorders: usize) -> usize {
    (foldhash::fast::FixedState::with_seed(0).hash_one(endpoint) % recorders as u64) as usize
}

async fn run(pipeline: Pipeline, incoming: mpsc::UnboundedReceiver<Pending>, recorder: usize) {
    // This process's rows of the per-minute attempt counts are its own: no other process's
    // recorder writes them.
    let writer = i64::from(pipeline.process) * POSTGRES_RECORDERS as i64 + recorder as i64;
    let write = |batch: Vec<Pending>| commit_batch(pipeline.clone(), batch, writer);
    group_commit::run(incoming, OnePerMessage::default, write).await;
}

/// At most `MAX_BATCH` attempts per batch, and one per message: a message leased
/// again after its lease ran out may bring two, and only the current lease's may
/// be recorded (both would claim the same attempt number).
#[derive(Default)]
struct OnePerMessage {
    messages: HashSet<MessageId>,
}

impl BatchLimit<Pending> for OnePerMessage {
    fn admits(&mut self, pending: &Pending) -> bool {
        self.messages.len() < MAX_BATCH && self.messages.insert(pending.record.message.id.clone())
    }
}

/// Writes one batch in one transaction and answers each attempt's worker; `writer`
/// names the recorder's rows of the per-minute attempt counts.
async fn commit_batch(pipeline: Pipeline, batch: Vec<Pending>, writer: i64) {
    let (records, replies): (Vec<_>, Vec<_>) = batch.into_iter().map(|p| (p.record, p.reply)).unzip();
    let size = records.len();
    // Attempts sent and not yet recorded wait out an outage here, and are recorded as soon as the
    // database answers again: their messages are neither sent twice nor left leased.
    let recorded = pipeline.health.through_outage("recording attempts", || write(&pipeline, &records, writer)).await;
    match recorded {
        Ok(results) => {
            for (reply, result) in replies.into_iter().zip(results) {
                let _ = reply.send(Ok(result));
            }
        }
        // Logged by the health; the messages are tried again when their leases end.
        Err(e) => {
            for reply in replies {
                let _ = reply.send(Err(e.to_string()));
            }
        }
    }
    crate::telemetry::hot().record_batch.record(size as f64);
}

/// The attempt's row.
fn attempt_row(r: &AttemptRecord) -> attempt::Model {
    let msg = &r.message;
    attempt::Model {
        message_id: msg.id.clone(),
        customer_id: msg.customer_id.clone(),
        number: msg.attempt_count + 1,
        started_at: r.started_at,
        duration_ms: r.received.duration_ms as i64,
        status_code: r.received.status.map(i32::from),
        error_kind: r.received.error.as_ref().map(|(kind, _)| *kind),
        error_detail: r.received.error.as_ref().map(|(_, detail)| detail.clone()),
        outcome: r.decision.outcome,
        request_headers: r.request_headers.clone(),
        trace_id: r.trace_id.clone(),
        response_headers: headers_json(&r.received.headers),
        response_body: (!r.received.body.is_empty())
            .then(|| String::from_utf8_lossy(&r.received.body).replace('\0', "\u{FFFD}")),
    }
}

/// One transaction for the whole batch, counted in the per-minute rows of
/// `writer` (no two recorders share one); the results are in the batch's order.
async fn write(pipeline: &Pipeline, records: &[AttemptRecord], writer: i64) -> Result<Vec<Option<Transition>>, DbErr> {
    let now = pipeline.now_ms();
    let ends: Vec<End> = records
        .iter()
        .map(|r| End {
            id: r.message.id.clone(),
            lease_token: r.message.lease_token.unwrap_or_default(),
            finish: r.decision.finish.clone(),
        })
        .collect();
    if !store::is_postgres(&pipeline.db) && !records.iter().any(reported) {
        let rows = records.iter().map(attempt_row).collect();
        let quiet = |txn: &Direct| write_quiet(pipeline, txn, records, &ends, rows, now, writer);
        if let Some(results) = sqlite_direct::transaction(&pipeline.db, quiet).await? {
            return Ok(results);
        }
        // A circuit changes state: written below, where the change is acted on, audited and told.
    }
    let rows = records.iter().map(attempt_row).collect();
    let txn = pipeline.db.begin().await?;
    let moved = messages::finish_recording(&txn, &ends, rows, now, writer).await?;
    let by_endpoint = charged_by_endpoint(records, &moved);
    // Locked last, so that another process's batch, or an admin's change, waits for these
    // circuits as briefly as can be.
    let endpoint_ids = by_endpoint.keys().map(|&id| id.clone()).collect();
    let mut results: Vec<Option<Transition>> = vec![None; records.len()];
    let mut circuits = Vec::new();
    let mut reports = Vec::new();
    for endpoint in lock_many(&txn, endpoint_ids).await? {
        let indexes = &by_endpoint[&endpoint.id];
        let outcomes: Vec<bool> = indexes.iter().map(|&i| records[i].decision.outcome == Outcome::Success).collect();
        let (circuit, transitions) = count_attempts(pipeline, &txn, &endpoint, &outcomes, now, &mut reports).await?;
        for (&i, transition) in indexes.iter().zip(transitions) {
            results[i] = Some(transition);
        }
        circuits.push((endpoint.id, circuit));
    }
    save_circuits(&txn, &circuits, now).await?;
    // Operational events, in the same transaction: a success-only batch reads nothing more.
    let died: Vec<message::Model> = records
        .iter()
        .filter(|r| r.decision.finish.state == MessageState::Dead && moved.contains(&r.message.id))
        .map(|r| message::Model { dead_reason: r.decision.finish.dead_reason.map(str::to_string), ..r.message.clone() })
        .collect();
    let mut announced = report_dead(pipeline, &txn, &died).await?;
    announced.merge(report_endpoints(pipeline, &txn, reports).await?);
    let gone =
        records.iter().filter(|r| r.decision.finish.next_attempt_at == Some(PAUSED) && moved.contains(&r.message.id));
    announced.merge(pause_gone(pipeline, &txn, gone, now).await?);
    pipeline.commit_and_wake(txn, announced.into()).await?;
    Ok(recorded(records, &moved, results))
}

/// Whether an attempt's end is told to its customer: its message died, or its subscription
/// pauses (the receiver answered `410 Gone`).
fn reported(record: &AttemptRecord) -> bool {
    let finish = &record.decision.finish;
    finish.state == MessageState::Dead || finish.next_attempt_at == Some(PAUSED)
}

/// A batch that nobody is told of, on SQLite: its statements run on the writer connection in
/// one hand-over (see [`sqlite_direct`]). `None`, writing nothing, when a circuit changes state
/// in a way Herald acts on (see [`acted_on`]).
fn write_quiet(
    pipeline: &Pipeline,
    txn: &Direct,
    records: &[AttemptRecord],
    ends: &[End],
    rows: Vec<attempt::Model>,
    now: i64,
    writer: i64,
) -> Result<Option<Vec<Option<Transition>>>, DbErr> {
    let moved = messages::finish_recording_direct(txn, ends, rows, now, writer)?;
    let by_endpoint = charged_by_endpoint(records, &moved);
    let endpoint_ids = by_endpoint.keys().map(|&id| id.clone()).collect();
    let breaker = pipeline.settings.breaker.config();
    let mut results: Vec<Option<Transition>> = vec![None; records.len()];
    let mut circuits = Vec::new();
    for endpoint in lock_many_direct(txn, endpoint_ids)? {
        let mut circuit = circuit_of(&endpoint);
        for &i in &by_endpoint[&endpoint.id] {
            let transition = circuit.record(records[i].decision.outcome == Outcome::Success, now, &breaker);
            if acted_on(transition).is_some() {
                return Ok(None);
            }
            results[i] = Some(transition);
        }
        circuits.push((endpoint.id, circuit));
    }
    save_circuits_direct(txn, &circuits, now)?;
    Ok(Some(recorded(records, &moved, results)))
}

/// The indexes of the attempts the endpoints' circuits count, by endpoint: those that moved
/// their message (the others' leases were lost) and that Herald did not fail itself.
fn charged_by_endpoint<'r>(
    records: &'r [AttemptRecord],
    moved: &HashSet<MessageId>,
) -> BTreeMap<&'r EndpointId, Vec<usize>> {
    let mut by_endpoint: BTreeMap<&EndpointId, Vec<usize>> = BTreeMap::new();
    for (i, record) in records.iter().enumerate().filter(|(_, r)| r.charged && moved.contains(&r.message.id)) {
        by_endpoint.entry(&record.message.endpoint_id).or_default().push(i);
    }
    by_endpoint
}

/// The batch's results: an attempt whose endpoint is gone, or that its circuit does not count,
/// still counts as recorded when its message moved.
fn recorded(
    records: &[AttemptRecord],
    moved: &HashSet<MessageId>,
    mut results: Vec<Option<Transition>>,
) -> Vec<Option<Transition>> {
    let unchanged = Transition { from: EndpointState::Closed, to: EndpointState::Closed };
    for (i, record) in records.iter().enumerate() {
        if results[i].is_none() && moved.contains(&record.message.id) {
            results[i] = Some(unchanged);
        }
    }
    results
}

/// Pauses, in the recorder's transaction, the subscriptions whose receiver answered `410 Gone`
/// (their messages were held with the pause, see `decide::gone`): each that was active gets its
/// audit row, by `system`, and the operational event `herald.subscription.paused`.
async fn pause_gone<'a>(
    pipeline: &Pipeline,
    txn: &DatabaseTransaction,
    gone: impl Iterator<Item = &'a AttemptRecord>,
    now: i64,
) -> Result<Announced, DbErr> {
    let mut subscriptions: Vec<&SubscriptionId> = gone.map(|r| &r.message.subscription_id).collect();
    if subscriptions.is_empty() {
        return Ok(Announced::default());
    }
    subscriptions.sort();
    subscriptions.dedup();
    let mut reports = Vec::new();
    for id in subscriptions {
        let Some(paused) = store::subscriptions::pause_if_active(txn, id, now).await? else { continue };
        tracing::warn!(subscription_id = %id, "the receiver answered 410 Gone; the subscription is paused");
        let report = PausedReport { subscription_id: id.to_string(), url: paused.url.clone(), reason: PAUSED_GONE };
        let detail = serde_json::to_string(&report).expect("reports serialize to JSON");
        let row = audit::row(now, audit::SYSTEM, "subscription.pause", id, Some(&paused.customer_id), detail);
        audit::insert(txn, row).await?;
        reports.push((paused.customer_id, Report::Paused(report)));
    }
    report(pipeline, txn, reports).await
}

/// A circuit's transition that Herald acts on: a lock holds the endpoint's messages, a close
/// after a probe releases them, and a disable starts the probes. Each is audited and told.
#[derive(Clone, Copy)]
enum Acted {
    Lock,
    Close,
    Disable,
}

impl Acted {
    /// The audit trail's action.
    fn action(self) -> &'static str {
        match self {
            Acted::Lock => "endpoint.lock",
            Acted::Close => "endpoint.close",
            Acted::Disable => "endpoint.disable",
        }
    }
}

fn acted_on(transition: Transition) -> Option<Acted> {
    match (transition.from, transition.to) {
        (from, EndpointState::Locked) if from != EndpointState::Locked => Some(Acted::Lock),
        (EndpointState::Disabled, EndpointState::Closed) => Some(Acted::Close),
        (EndpointState::Closed, EndpointState::Disabled) => Some(Acted::Disable),
        _ => None,
    }
}

/// Applies the breaker's rules to each outcome in turn; acts on every
/// transition (hold when locked, release when closed) and adds the ones the
/// customer is told of to `reports`. Returns the circuit to save.
async fn count_attempts(
    pipeline: &Pipeline,
    txn: &DatabaseTransaction,
    endpoint: &endpoint::Model,
    outcomes: &[bool],
    now: i64,
    reports: &mut Vec<(CustomerId, EndpointReport)>,
) -> Result<(Circuit, Vec<Transition>), DbErr> {
    let endpoint_id = &endpoint.id;
    let breaker = pipeline.settings.breaker.config();
    let mut circuit = circuit_of(endpoint);
    let mut transitions = Vec::with_capacity(outcomes.len());
    for &success in outcomes {
        let transition = circuit.record(success, now, &breaker);
        let acted = acted_on(transition);
        match acted {
            Some(Acted::Lock) => {
                let held = messages::hold_endpoint(txn, endpoint_id, now).await?;
                tracing::warn!(%endpoint_id, held, "endpoint locked; its messages are held until an admin unlocks it");
            }
            Some(Acted::Close) => {
                // Messages deferred to a probe are due at most one probe interval ahead.
                messages::release_endpoint(txn, endpoint_id, now + breaker.probe_ms, now).await?;
                tracing::info!(%endpoint_id, "probe succeeded; endpoint closed");
            }
            Some(Acted::Disable) => {
                tracing::warn!(%endpoint_id, "endpoint disabled; probing it every {} s", breaker.probe_ms / 1000);
            }
            None => {}
        }
        // Herald's own change of a circuit is audited like an admin's, in the same transaction,
        // and told to the customer as an operational event.
        if let Some(action) = acted.map(Acted::action) {
            let reason = announced(transition, &circuit, now, &breaker).unwrap_or(action);
            let report = EndpointReport::of(endpoint_id, &endpoint.url, &circuit, reason, now, &breaker);
            let detail = serde_json::to_string(&report).expect("reports serialize to JSON");
            audit::insert(
                txn,
                audit::row(now, audit::SYSTEM, action, endpoint_id, Some(&endpoint.customer_id), detail),
            )
            .await?;
            reports.push((endpoint.customer_id.clone(), report));
        }
        transitions.push(transition);
    }
    Ok((circuit, transitions))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_has_one_recorder_and_endpoints_share_them_all() {
        let endpoints: Vec<EndpointId> = (0..64).map(|i| EndpointId::from(format!("ep_{i:026}"))).collect();
        for endpoint in &endpoints {
            let recorder = recorder_of(endpoint, POSTGRES_RECORDERS);
            assert!(recorder < POSTGRES_RECORDERS);
            assert_eq!(recorder_of(&endpoint.clone(), POSTGRES_RECORDERS), recorder, "always the same one");
            assert_eq!(recorder_of(endpoint, 1), 0, "SQLite's one recorder");
        }
        let used: std::collections::BTreeSet<usize> =
            endpoints.iter().map(|e| recorder_of(e, POSTGRES_RECORDERS)).collect();
        assert_eq!(used.len(), POSTGRES_RECORDERS, "every recorder gets a share of the endpoints");
    }
}
