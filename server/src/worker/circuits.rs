//! Counting attempts into their endpoints' circuits. A circuit is read, counted
//! and saved with its endpoint's row locked until the commit, so concurrent
//! transactions that count the same endpoint take turns. On SQLite the
//! recorder counts in its own transaction (there is one writer anyway). On
//! PostgreSQL the recorder's concurrent batches would queue on a busy
//! endpoint's lock, each holding it over round trips and a commit's flush; so
//! there the recorder commits its batch first and hands the outcomes to one
//! task per process, which counts everything that has gathered in one short
//! transaction of its own. A crash between the two commits loses at most those
//! batches' counts, never an attempt or a message's state.

use std::collections::BTreeMap;

use app::domain::breaker::{Circuit, Transition};
use app::domain::states::EndpointState;
use sea_orm::{DatabaseTransaction, DbErr, TransactionTrait};
use tokio::sync::{mpsc, oneshot};

use crate::state::AppState;
use crate::store::endpoints::{circuit_of, lock_many, save_circuits};
use crate::store::messages;

/// One attempt's outcome at its endpoint.
pub struct Outcome {
    pub endpoint_id: String,
    pub success: bool,
}

/// What counting an outcome did to its circuit; unchanged when the endpoint is gone.
pub const UNCHANGED: Transition = Transition { from: EndpointState::Closed, to: EndpointState::Closed };

/// The most outcomes counted in one transaction.
const MAX_BATCH: usize = 4096;

/// Counts `outcomes` in order into their endpoints' circuits, locked in id
/// order, and acts on every transition (holds an endpoint's messages when it
/// locks, releases them when it closes). Returns one transition per outcome.
pub async fn count(
    state: &AppState,
    txn: &DatabaseTransaction,
    outcomes: &[Outcome],
    now: i64,
) -> Result<Vec<Transition>, DbErr> {
    let mut by_endpoint: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, outcome) in outcomes.iter().enumerate() {
        by_endpoint.entry(outcome.endpoint_id.as_str()).or_default().push(i);
    }
    let mut transitions = vec![UNCHANGED; outcomes.len()];
    if by_endpoint.is_empty() {
        return Ok(transitions);
    }
    let ids = by_endpoint.keys().map(|id| id.to_string()).collect();
    let mut circuits = Vec::new();
    for endpoint in lock_many(txn, ids).await? {
        let indexes = &by_endpoint[endpoint.id.as_str()];
        let mut circuit = circuit_of(&endpoint);
        for &i in indexes {
            transitions[i] = count_one(state, txn, &endpoint.id, &mut circuit, outcomes[i].success, now).await?;
        }
        circuits.push((endpoint.id, circuit));
    }
    save_circuits(txn, &circuits, now).await?;
    Ok(transitions)
}

/// Applies the breaker's rules to one outcome, and acts on the transition.
async fn count_one(
    state: &AppState,
    txn: &DatabaseTransaction,
    endpoint_id: &str,
    circuit: &mut Circuit,
    success: bool,
    now: i64,
) -> Result<Transition, DbErr> {
    let breaker = state.settings.breaker.config();
    let transition = circuit.record(success, now, &breaker);
    match (transition.from, transition.to) {
        (from, EndpointState::Locked) if from != EndpointState::Locked => {
            let held = messages::hold_endpoint(txn, endpoint_id, now).await?;
            tracing::warn!(endpoint_id, held, "endpoint locked; its messages are held until an admin unlocks it");
        }
        (EndpointState::Disabled, EndpointState::Closed) => {
            // Messages deferred to a probe are due at most one probe interval ahead.
            messages::release_endpoint(txn, endpoint_id, now + breaker.probe_ms, now).await?;
            tracing::info!(endpoint_id, "probe succeeded; endpoint closed");
        }
        (EndpointState::Closed, EndpointState::Disabled) => {
            tracing::warn!(endpoint_id, "endpoint disabled; probing it every {} s", breaker.probe_ms / 1000);
        }
        _ => {}
    }
    Ok(transition)
}

struct Request {
    outcomes: Vec<Outcome>,
    reply: oneshot::Sender<Vec<Transition>>,
}

/// The task that counts committed attempts' outcomes, many batches per transaction.
#[derive(Clone)]
pub struct Counter {
    queue: mpsc::UnboundedSender<Request>,
}

impl Counter {
    pub fn spawn(state: AppState) -> Counter {
        let (queue, incoming) = mpsc::unbounded_channel();
        tokio::spawn(run(state, incoming));
        Counter { queue }
    }

    /// Counts the outcomes; returns their transitions, in order. Outcomes
    /// whose counting failed are reported unchanged (the failure is logged):
    /// their attempts are recorded all the same.
    pub async fn count(&self, outcomes: Vec<Outcome>) -> Vec<Transition> {
        let size = outcomes.len();
        let (reply, answer) = oneshot::channel();
        if self.queue.send(Request { outcomes, reply }).is_err() {
            return vec![UNCHANGED; size];
        }
        answer.await.unwrap_or_else(|_| vec![UNCHANGED; size])
    }
}

async fn run(state: AppState, mut incoming: mpsc::UnboundedReceiver<Request>) {
    while let Some(first) = incoming.recv().await {
        let mut size = first.outcomes.len();
        let mut batch = vec![first];
        while size < MAX_BATCH {
            match incoming.try_recv() {
                Ok(next) => {
                    size += next.outcomes.len();
                    batch.push(next);
                }
                Err(_) => break,
            }
        }
        let (parts, replies): (Vec<_>, Vec<_>) = batch.into_iter().map(|r| (r.outcomes, r.reply)).unzip();
        let sizes: Vec<usize> = parts.iter().map(Vec::len).collect();
        let outcomes: Vec<Outcome> = parts.into_iter().flatten().collect();
        let mut transitions = match count_alone(&state, &outcomes).await {
            Ok(transitions) => transitions,
            Err(e) => {
                tracing::error!(error = %e, outcomes = outcomes.len(), "counting attempts into their circuits failed");
                vec![UNCHANGED; outcomes.len()]
            }
        }
        .into_iter();
        for (reply, size) in replies.into_iter().zip(sizes) {
            let _ = reply.send(transitions.by_ref().take(size).collect());
        }
    }
}

async fn count_alone(state: &AppState, outcomes: &[Outcome]) -> Result<Vec<Transition>, DbErr> {
    let txn = state.db.begin().await?;
    let transitions = count(state, &txn, outcomes, state.now_ms()).await?;
    txn.commit().await?;
    Ok(transitions)
}
