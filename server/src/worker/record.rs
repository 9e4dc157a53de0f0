//! Writes the ends of attempts, many per transaction (group commit): each
//! message's next state (guarded by its lease) and the attempt rows; then each
//! endpoint's circuit counts the batch's outcomes once (see `circuits`), whose
//! transitions hold or release the endpoint's other messages. A lone attempt
//! is written at once; under load, the attempts that finish while a batch is
//! being written form the next one.

use std::collections::HashSet;

use app::domain::breaker::Transition;
use app::domain::states::Outcome as AttemptOutcome;
use sea_orm::{DbErr, TransactionTrait};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use super::circuits::{self, Counter, Outcome};
use super::decide::Decision;
use super::http::Received;
use crate::ids::new_id;
use crate::state::AppState;
use crate::store::entities::{attempt, message};
use crate::store::is_postgres;
use crate::store::messages::{self, End};
use crate::store::writers::Writers;

/// The most attempts written in one transaction.
const MAX_BATCH: usize = 256;

/// One finished attempt, as the worker hands it over.
pub struct AttemptRecord {
    pub message: message::Model,
    pub started_at: i64,
    pub request_headers: Vec<(String, String)>,
    pub received: Received,
    pub decision: Decision,
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
    queue: mpsc::UnboundedSender<Pending>,
}

impl Recorder {
    pub fn spawn(state: AppState) -> Recorder {
        let (queue, incoming) = mpsc::unbounded_channel();
        let counter = is_postgres(&state.db).then(|| Counter::spawn(state.clone()));
        tokio::spawn(run(state, counter, incoming));
        Recorder { queue }
    }

    pub async fn record(&self, record: AttemptRecord) -> Recorded {
        let (reply, answer) = oneshot::channel();
        self.queue.send(Pending { record, reply }).map_err(|_| "the recorder has stopped".to_string())?;
        answer.await.map_err(|_| "the recorder dropped the attempt".to_string())?
    }
}

async fn run(state: AppState, counter: Option<Counter>, mut incoming: mpsc::UnboundedReceiver<Pending>) {
    let mut writers = Writers::for_database(&state.db);
    let mut held: Option<Pending> = None;
    loop {
        writers.room().await;
        let first = match held.take() {
            Some(pending) => pending,
            None => match incoming.recv().await {
                Some(pending) => pending,
                None => break,
            },
        };
        // One attempt per message in a batch: a message leased again after its lease ran
        // out may bring two, and only the current lease's may be recorded (both would
        // claim the same attempt number).
        let mut messages = HashSet::from([first.record.message.id.clone()]);
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match incoming.try_recv() {
                Ok(next) if messages.contains(&next.record.message.id) => {
                    held = Some(next);
                    break;
                }
                Ok(next) => {
                    messages.insert(next.record.message.id.clone());
                    batch.push(next);
                }
                Err(_) => break,
            }
        }
        writers.spawn(commit_batch(state.clone(), counter.clone(), batch));
    }
    writers.finish().await;
}

/// Writes one batch and answers each attempt's worker.
async fn commit_batch(state: AppState, counter: Option<Counter>, batch: Vec<Pending>) {
    let (records, replies): (Vec<_>, Vec<_>) = batch.into_iter().map(|p| (p.record, p.reply)).unzip();
    let size = records.len();
    match write(&state, counter.as_ref(), records).await {
        Ok(results) => {
            for (reply, result) in replies.into_iter().zip(results) {
                let _ = reply.send(Ok(result));
            }
        }
        Err(e) => {
            tracing::error!(error = %e, size, "recording attempts failed; their leases will expire and they are retried");
            for reply in replies {
                let _ = reply.send(Err(e.to_string()));
            }
        }
    }
    metrics::histogram!("herald_record_batch_size").record(size as f64);
}

fn headers_json(headers: &[(String, String)]) -> String {
    let map: Map<String, Value> = headers.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    Value::Object(map).to_string()
}

fn attempt_row(r: &AttemptRecord) -> attempt::Model {
    let msg = &r.message;
    attempt::Model {
        id: new_id("att"),
        message_id: msg.id.clone(),
        customer_id: msg.customer_id.clone(),
        number: msg.attempt_count + 1,
        started_at: r.started_at,
        duration_ms: r.received.duration_ms as i64,
        status_code: r.received.status.map(i32::from),
        error_kind: r.received.error.as_ref().map(|(kind, _)| kind.as_str().to_string()),
        error_detail: r.received.error.as_ref().map(|(_, detail)| detail.clone()),
        outcome: r.decision.outcome.as_str().to_string(),
        request_headers: headers_json(&r.request_headers),
        response_headers: headers_json(&r.received.headers),
        response_body: (!r.received.body.is_empty())
            .then(|| String::from_utf8_lossy(&r.received.body).replace('\0', "\u{FFFD}")),
    }
}

/// Records the batch; the results are in the batch's order. With a `counter`
/// (PostgreSQL) the messages and attempts are written by one statement and the
/// counter then counts the outcomes; otherwise one transaction does both.
async fn write(
    state: &AppState,
    counter: Option<&Counter>,
    records: Vec<AttemptRecord>,
) -> Result<Vec<Option<Transition>>, DbErr> {
    let now = state.now_ms();
    let ends: Vec<End> = records
        .iter()
        .map(|r| End {
            id: r.message.id.clone(),
            lease_token: r.message.lease_token.unwrap_or_default(),
            finish: r.decision.finish.clone(),
        })
        .collect();
    let rows: Vec<attempt::Model> = records.iter().map(attempt_row).collect();
    let outcomes = |moved: &HashSet<String>| -> (Vec<usize>, Vec<Outcome>) {
        records
            .iter()
            .enumerate()
            .filter(|(_, r)| moved.contains(&r.message.id))
            .map(|(i, r)| {
                let success = r.decision.outcome == AttemptOutcome::Success;
                (i, Outcome { endpoint_id: r.message.endpoint_id.clone(), success })
            })
            .unzip()
    };
    let (counted, transitions) = match counter {
        Some(counter) => {
            let moved = messages::finish_recording_at_once(&state.db, &ends, &rows, now).await?;
            let (counted, outcomes) = outcomes(&moved);
            (counted, counter.count(outcomes).await)
        }
        None => {
            let txn = state.db.begin().await?;
            let moved = messages::finish_recording(&txn, &ends, rows, now).await?;
            let (counted, outcomes) = outcomes(&moved);
            let transitions = circuits::count(state, &txn, &outcomes, now).await?;
            txn.commit().await?;
            (counted, transitions)
        }
    };
    let mut results: Vec<Option<Transition>> = vec![None; records.len()];
    for (i, transition) in counted.into_iter().zip(transitions) {
        results[i] = Some(transition);
    }
    Ok(results)
}
