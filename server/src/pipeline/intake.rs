//! Publishing by group commit. Publish requests queue here, and one task
//! writes whatever gathered while the previous write ran: many requests share
//! one atomic write of their events and messages
//! (on PostgreSQL a single statement, on SQLite one transaction). A request is
//! answered only after its commit, so an acknowledged event is never lost.
//! Batches are routed with each customer's subscriptions as last read (see
//! [`super::routes`]), which the write checks are still current.
//! Messages whose endpoint and lane have free permits are stored already
//! leased and handed straight to the fresh lane (see [`super::handoff`]).

use std::sync::Arc;

use domain::breaker::Gate;
use domain::dto::{PublishResult, PublishedEvent};
use domain::event::CloudEvent;
use domain::ids::{CustomerId, EndpointId, EventId};
use domain::states::MessageState;
use foldhash::{HashMap, HashMapExt, HashSet};
use sea_orm::{DatabaseConnection, DbErr};
use tokio::sync::{mpsc, oneshot};

use super::PublishError;
use super::group_commit::{self, BatchLimit};
use super::handoff::{Dispatch, Handoff, Ready, Reservation};
use super::job::Job;
use super::routes::{Route, RoutedSubscription, Routes, routed_by};
use super::spans::Spans;
use super::wakeup::Wakeup;
use crate::clock::SharedClock;
use crate::ids;
use crate::store::endpoints::gate_of;
use crate::store::entities::{endpoint, event, message};
use crate::store::health::DatabaseHealth;
use crate::store::messages::{PAUSED, message_for};
use crate::store::wal_flush::WalFlush;
use crate::store::{events, notify, processes, subscriptions};

type Result<T> = std::result::Result<T, PublishError>;

/// Events written in one batch at most; a request is never split.
const MAX_EVENTS: usize = 2000;

/// Routings a batch is written with before its requests are refused (each
/// try follows a change to a customer's subscriptions or endpoints).
const ROUTING_TRIES: usize = 5;

/// What the intake task needs (not the whole application state, which holds the intake).
pub struct IntakeContext {
    pub db: DatabaseConnection,
    pub health: Arc<DatabaseHealth>,
    pub clock: SharedClock,
    pub wake: Arc<Wakeup>,
    pub handoff: Arc<Handoff>,
    /// How long a handed-over message stays leased.
    pub lease_ms: i64,
    /// This process's number, the upper half of its lease tokens.
    pub process: i32,
    /// Where the publishes' spans go, when they are exported.
    pub spans: Option<Arc<Spans>>,
    /// The flush that makes a batch durable before its requests are answered (SQLite with
    /// `sqlite_synchronous = full`).
    pub wal: Option<Arc<WalFlush>>,
}

type Reply = oneshot::Sender<Result<PublishResult>>;

struct Request {
    customer_id: CustomerId,
    events: Vec<CloudEvent>,
    reply: Reply,
}

#[derive(Clone)]
pub struct Intake {
    queue: mpsc::UnboundedSender<Request>,
}

impl Intake {
    pub fn spawn(parts: IntakeContext) -> Intake {
        let (queue, incoming) = mpsc::unbounded_channel();
        tokio::spawn(run(parts, incoming));
        Intake { queue }
    }

    /// Stores the events for the customer; returns once they are committed.
    pub async fn publish(&self, customer_id: CustomerId, events: Vec<CloudEvent>) -> Result<PublishResult> {
        let (reply, answer) = oneshot::channel();
        let stopped = || PublishError::Db(DbErr::Custom("the intake has stopped".into()));
        self.queue.send(Request { customer_id, events, reply }).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

async fn run(parts: IntakeContext, incoming: mpsc::UnboundedReceiver<Request>) {
    let parts = Arc::new(parts);
    let routes = Arc::new(Routes::default());
    let write = |batch: Vec<Request>| commit_batch(parts.clone(), routes.clone(), batch);
    group_commit::run(incoming, EventBudget::default, write).await;
}

/// At most `MAX_EVENTS` events per batch, but always the first request: a request is never split.
#[derive(Default)]
struct EventBudget {
    requests: usize,
    events: usize,
}

impl BatchLimit<Request> for EventBudget {
    fn admits(&mut self, request: &Request) -> bool {
        let events = self.events + request.events.len();
        let fits = self.requests == 0 || events <= MAX_EVENTS;
        if fits {
            self.requests += 1;
            self.events = events;
        }
        fits
    }
}

/// Writes one batch atomically and answers each of its requests.
async fn commit_batch(parts: Arc<IntakeContext>, routes: Arc<Routes>, batch: Vec<Request>) {
    let size: usize = batch.iter().map(|r| r.events.len()).sum();
    let (work, replies): (Vec<_>, Vec<_>) = batch.into_iter().map(|r| ((r.customer_id, r.events), r.reply)).unzip();
    // While the database is away, a publish is refused at once rather than queued behind a
    // connection that will not come within the pool's deadline.
    if parts.health.is_down() {
        let error = PublishError::Unavailable(parts.health.outage_error().unwrap_or_default());
        for reply in replies {
            let _ = reply.send(Err(error.clone()));
        }
        return;
    }
    match write(&parts, &routes, &work).await {
        Ok(written) => {
            parts.handoff.hand(written.handed);
            if !written.pending.is_empty() {
                parts.wake.stored_for(written.pending);
            }
            if written.dropped_reservations {
                // The permits reserved for repeated events are free again.
                parts.wake.permits_freed();
            }
            answer_once_durable(parts.wal.clone(), replies, written.answers);
        }
        Err(e) => {
            match &e {
                PublishError::Db(db) => parts.health.failed("publishing", db),
                _ => tracing::error!(error = %e, requests = replies.len(), "publishing failed; nothing was stored"),
            }
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
    crate::telemetry::hot().publish_batch.record(size as f64);
}

/// Answers a committed batch's requests once its commit is on disk. The flush
/// starts as the commit returns, one for the whole batch, while the next batch
/// is written; the requests' answers then need no flush of their own (see
/// [`Flushed`](crate::store::wal_flush::Flushed)), where each asking on its own,
/// as its answer left, made most of them wait for a second flush.
fn answer_once_durable(wal: Option<Arc<WalFlush>>, replies: Vec<Reply>, answers: Vec<Result<PublishResult>>) {
    let send = |answers: Vec<Result<PublishResult>>| {
        for (reply, answer) in replies.into_iter().zip(answers) {
            let _ = reply.send(answer);
        }
    };
    let Some(wal) = wal else { return send(answers) };
    tokio::spawn(async move {
        match wal.flush().await {
            Ok(()) => send(answers),
            Err(e) => send(answers.into_iter().map(|_| Err(PublishError::Db(e.clone()))).collect()),
        }
    });
}

struct Written {
    /// One answer per request, in order: an error only where looking up an
    /// earlier event failed (the batch itself is stored).
    answers: Vec<Result<PublishResult>>,
    /// Messages stored leased, to hand to the fresh lane after the commit.
    handed: Vec<Dispatch>,
    /// The endpoints of messages stored pending, for the fresh lane to claim.
    pending: Vec<EndpointId>,
    /// Whether permits reserved for repeated events were given back.
    dropped_reservations: bool,
}

/// Where an event of a request ended up: a row of this batch, or a repeat of one.
enum Entry {
    Row(usize),
    RepeatOf(usize),
}

/// Routes the batch with the customers' kept routing and writes it; when the
/// write finds that routing changed, reads it again and routes anew.
async fn write(parts: &IntakeContext, routes: &Routes, work: &[(CustomerId, Vec<CloudEvent>)]) -> Result<Written> {
    let mut customers: Vec<CustomerId> = work.iter().map(|(c, _)| c.clone()).collect();
    customers.sort();
    customers.dedup();
    for _ in 0..ROUTING_TRIES {
        let routing = routes.of(&parts.db, &customers).await?;
        if let Some(written) = write_routed(parts, &routing, work).await? {
            return Ok(written);
        }
        routes.forget(&customers);
        // The permits reserved for the discarded routing are free again.
        parts.wake.permits_freed();
    }
    Err(PublishError::Conflict("the customer's subscriptions kept changing during the publish; try again".into()))
}

/// `None`, storing nothing, when the routing changed since it was read.
async fn write_routed(
    parts: &IntakeContext,
    routing: &[Arc<Route>],
    work: &[(CustomerId, Vec<CloudEvent>)],
) -> Result<Option<Written>> {
    let now = parts.clock.now_ms();
    let refused = check_schemas(work, routing);
    let Deduplicated { rows, published, entries } = deduplicate(work, refused, now);
    if rows.is_empty() && !routing_is_current(parts, routing).await? {
        // Every request was refused by a schema: the write that would have checked the routing
        // does not happen, so it is checked here (a schema may have been removed meanwhile).
        return Ok(None);
    }
    let (rows, mut new_messages, routed) = route(rows, &published, routing, now);
    let reserved = reserve(parts, &mut new_messages, &routed, now);
    let mut by_key: Vec<&event::Model> = rows.iter().map(Arc::as_ref).collect();
    by_key.sort_by(|a, b| (&a.customer_id, &a.source, &a.ce_id).cmp(&(&b.customer_id, &b.source, &b.ce_id)));
    let Some(inserted) = events::insert_with_messages(&parts.db, &by_key, &new_messages, &routed_by(routing)).await?
    else {
        return Ok(None);
    };
    // Stored: from here on nothing may fail the batch, or its handed-over messages would be lost
    // to the lane until their lease ends.
    let handed = hand_over_stored(new_messages, routed, reserved, &rows, &inserted);
    let stored = results(parts, &rows, &inserted, now).await;
    if !handed.pending.is_empty() {
        // The events are committed: a lost wake-up only leaves other instances to their poll.
        if let Err(e) = notify::send(&parts.db, parts.wake.origin()).await {
            parts.health.failed("notifying other processes of new messages", &e);
        }
    }
    let answers = answer(entries, &stored);
    Ok(Some(Written {
        answers,
        handed: handed.dispatches,
        pending: handed.pending,
        dropped_reservations: handed.dropped,
    }))
}

/// Whether the customers' routing versions are still those the batch was routed with.
async fn routing_is_current(parts: &IntakeContext, routing: &[Arc<Route>]) -> Result<bool> {
    let customers: Vec<CustomerId> = routing.iter().map(|route| route.customer_id.clone()).collect();
    let versions = subscriptions::routing_versions(&parts.db, &customers).await?;
    Ok(routing.iter().all(|route| route.version == versions.get(&route.customer_id).copied()))
}

/// Each request's events checked against the schemas of their types in the customer's catalog: the
/// error of a request refused (a batch is refused whole), `None` for one that passes. Nothing is
/// checked when no customer of the batch has a schema.
fn check_schemas(work: &[(CustomerId, Vec<CloudEvent>)], routing: &[Arc<Route>]) -> Vec<Option<PublishError>> {
    if routing.iter().all(|route| route.schemas.is_empty()) {
        return work.iter().map(|_| None).collect();
    }
    let schemas_of: HashMap<&str, &Route> =
        routing.iter().map(|route| (route.customer_id.as_str(), &**route)).collect();
    let check = |(customer_id, events): &(CustomerId, Vec<CloudEvent>)| {
        let schemas = &schemas_of.get(customer_id.as_str())?.schemas;
        let broken: Vec<(usize, Vec<String>)> = events
            .iter()
            .enumerate()
            .filter_map(|(i, event)| {
                let why = schemas.get(event.event_type())?.check_event(event);
                (!why.is_empty()).then_some((i, why))
            })
            .collect();
        (!broken.is_empty()).then_some(PublishError::Invalid(broken))
    };
    work.iter().map(check).collect()
}

/// A batch's distinct events: their rows, the event each was made of, and, per request, where each
/// of its events went (or why the request was refused).
struct Deduplicated<'a> {
    rows: Vec<event::Model>,
    published: Vec<&'a CloudEvent>,
    entries: Vec<Result<Vec<Entry>>>,
}

/// One row per distinct (customer, source, id) of the requests not refused; a repeat inside the
/// batch answers as a duplicate of its first.
fn deduplicate(
    work: &[(CustomerId, Vec<CloudEvent>)],
    refused: Vec<Option<PublishError>>,
    now: i64,
) -> Deduplicated<'_> {
    let mut rows: Vec<event::Model> = Vec::new();
    let mut published: Vec<&CloudEvent> = Vec::new();
    let mut first_of: HashMap<(&str, &str, &str), usize> = HashMap::new();
    let mut entries: Vec<Result<Vec<Entry>>> = Vec::with_capacity(work.len());
    for ((customer_id, batch), refused) in work.iter().zip(refused) {
        if let Some(error) = refused {
            entries.push(Err(error));
            continue;
        }
        let mut request_entries = Vec::with_capacity(batch.len());
        for ce in batch {
            let key = (customer_id.as_str(), ce.source(), ce.id());
            if let Some(&row) = first_of.get(&key) {
                request_entries.push(Entry::RepeatOf(row));
                continue;
            }
            first_of.insert(key, rows.len());
            request_entries.push(Entry::Row(rows.len()));
            published.push(ce);
            rows.push(event::Model {
                id: ids::new(),
                customer_id: customer_id.clone(),
                source: ce.source().to_string(),
                ce_id: ce.id().to_string(),
                event_type: ce.event_type().to_string(),
                payload: ce.stored_text(),
                created_at: now,
                message_ids: String::new(),
            });
        }
        entries.push(Ok(request_entries));
    }
    Deduplicated { rows, published, entries }
}

/// A batch's rows, their messages, and for each message its row and subscription.
type RoutedBatch<'a> = (Vec<Arc<event::Model>>, Vec<message::Model>, Vec<(usize, &'a RoutedSubscription)>);

/// Every row's messages, before knowing which rows are new: the store keeps only those of the
/// events it inserts, and the others' hand-overs are dropped. A subscription deleted after this
/// routing was checked by the write (READ COMMITTED) leaves messages that its lane ends unattempted.
fn route<'a>(
    mut rows: Vec<event::Model>,
    published: &[&CloudEvent],
    routing: &'a [Arc<Route>],
    now: i64,
) -> RoutedBatch<'a> {
    let routed_of: HashMap<&str, &[RoutedSubscription]> =
        routing.iter().map(|route| (route.customer_id.as_str(), route.subscriptions.as_slice())).collect();
    let mut new_messages: Vec<message::Model> = Vec::new();
    let mut routed: Vec<(usize, &RoutedSubscription)> = Vec::new();
    for (i, row) in rows.iter_mut().enumerate() {
        let routed_to = routed_of.get(row.customer_id.as_str()).copied().unwrap_or_default();
        // The event as filters see it, made only if a filter is evaluated on it.
        let mut message = None;
        for sub in routed_to {
            if !sub.accepts(&row.event_type) || !sub.passes(published[i], &mut message) {
                continue;
            }
            let msg = message_for(row, &sub.subscription, sub.policy.ttl_secs as i64 * 1000, now);
            row.add_message_id(&msg.id);
            new_messages.push(msg);
            routed.push((i, sub));
        }
    }
    (rows.into_iter().map(Arc::new).collect(), new_messages, routed)
}

/// The lane's permits, reserved before the write: the messages that got them are stored leased.
fn reserve(
    parts: &IntakeContext,
    new_messages: &mut [message::Model],
    routed: &[(usize, &RoutedSubscription)],
    now: i64,
) -> Vec<Option<Reservation>> {
    let handing = parts.handoff.is_open();
    let token = processes::lease_token(parts.process);
    new_messages
        .iter_mut()
        .zip(routed)
        .map(|(msg, (_, sub))| {
            // Not a message its subscription's pause holds.
            let due = msg.next_attempt_at != Some(PAUSED);
            // Nor a paced endpoint's: it waits in the database and the lane claims it as its turns
            // come, so that a paced backlog never fills the lane's queue ahead of other endpoints.
            let paced = sub.subscription.rate_limit_per_sec.is_some();
            let open = sub.endpoint.as_ref().filter(|e| handing && due && !paced && gate_of(e, now) == Gate::Send);
            open.and_then(|endpoint| lease(parts, endpoint, msg, now, token))
        })
        .collect()
}

/// What became of a batch's messages once stored.
struct HandedOver {
    dispatches: Vec<Dispatch>,
    /// The endpoints of messages stored pending.
    pending: Vec<EndpointId>,
    /// Whether permits reserved for repeated events were given back.
    dropped: bool,
}

/// Each leased message moves into its job; a repeated event's messages were not stored, and their
/// permits are given back.
fn hand_over_stored(
    new_messages: Vec<message::Model>,
    routed: Vec<(usize, &RoutedSubscription)>,
    reserved: Vec<Option<Reservation>>,
    rows: &[Arc<event::Model>],
    inserted: &HashSet<EventId>,
) -> HandedOver {
    let mut handed = HandedOver { dispatches: Vec::with_capacity(reserved.len()), pending: Vec::new(), dropped: false };
    for ((msg, (i, sub)), reservation) in new_messages.into_iter().zip(routed).zip(reserved) {
        let stored = inserted.contains(&rows[i].id);
        match reservation {
            Some(reserved) if stored => handed.dispatches.push(hand_over(reserved, msg, sub, &rows[i])),
            Some(_) => handed.dropped = true,
            None if stored && msg.next_attempt_at != Some(PAUSED) => handed.pending.push(msg.endpoint_id),
            None => {}
        }
    }
    handed.pending.sort();
    handed.pending.dedup();
    handed
}

/// Each row's result: its messages, or, for an event published before, the first one's.
async fn results(
    parts: &IntakeContext,
    rows: &[Arc<event::Model>],
    inserted: &HashSet<EventId>,
    now: i64,
) -> Vec<Result<PublishedEvent>> {
    let mut stored: Vec<Result<PublishedEvent>> = Vec::with_capacity(rows.len());
    for row in rows {
        if !inserted.contains(&row.id) {
            stored.push(earlier(&parts.db, row).await);
            continue;
        }
        stored.push(Ok(PublishedEvent {
            id: row.ce_id.clone(),
            source: row.source.clone(),
            duplicate: false,
            message_ids: row.message_id_list(),
        }));
    }
    if let Some(spans) = &parts.spans {
        let committed = parts.clock.now_ms();
        for row in rows.iter().filter(|row| inserted.contains(&row.id)) {
            spans.publish(row, now, committed);
        }
    }
    stored
}

/// Each request's answer, an entry per event, in order.
fn answer(entries: Vec<Result<Vec<Entry>>>, stored: &[Result<PublishedEvent>]) -> Vec<Result<PublishResult>> {
    let answer = |entry: Entry| -> Result<PublishedEvent> {
        let (i, repeat) = match entry {
            Entry::Row(i) => (i, false),
            Entry::RepeatOf(i) => (i, true),
        };
        match &stored[i] {
            Ok(event) => Ok(PublishedEvent { duplicate: event.duplicate || repeat, ..event.clone() }),
            Err(e) => Err(e.clone()),
        }
    };
    entries
        .into_iter()
        .map(|request_entries| {
            let events = request_entries?.into_iter().map(answer).collect::<Result<Vec<_>>>()?;
            Ok(PublishResult { events })
        })
        .collect()
}

/// Reserves the fresh lane's permits for the message when it has them free
/// (and the endpoint's circuit is closed), and marks it leased.
fn lease(
    parts: &IntakeContext,
    endpoint: &endpoint::Model,
    msg: &mut message::Model,
    now: i64,
    token: i64,
) -> Option<Reservation> {
    let reserved = parts.handoff.reserve(&endpoint.id)?;
    msg.state = MessageState::Delivering;
    msg.next_attempt_at = Some(now + parts.lease_ms);
    msg.lease_token = Some(token);
    Some(reserved)
}

/// The stored, leased message with what its attempt needs, with the permits reserved for it.
fn hand_over(
    reserved: Reservation,
    message: message::Model,
    sub: &RoutedSubscription,
    row: &Arc<event::Model>,
) -> Dispatch {
    let job = Job {
        message,
        subscription: Some(Arc::clone(&sub.subscription)),
        event: Some(Arc::clone(row)),
        endpoint: sub.endpoint.clone(),
    };
    match reserved {
        Reservation::Start(permit) => Dispatch::Start(Ready { job, permit }),
        Reservation::Queue(queued) => Dispatch::Queue(job, queued),
    }
}

/// The answer for an event published before this batch.
async fn earlier(db: &DatabaseConnection, row: &event::Model) -> Result<PublishedEvent> {
    let existing = events::find_by_key(db, &row.customer_id, &row.source, &row.ce_id)
        .await?
        .ok_or(PublishError::Conflict("the event is being published concurrently; try again".into()))?;
    let message_ids = existing.message_id_list();
    Ok(PublishedEvent { id: existing.ce_id, source: existing.source, duplicate: true, message_ids })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn published(id: &str) -> Result<PublishResult> {
        let event = PublishedEvent { id: id.into(), source: "/s".into(), duplicate: false, message_ids: Vec::new() };
        Ok(PublishResult { events: vec![event] })
    }

    /// Answers `n` requests of a committed batch through `wal`; returns what each got.
    async fn answered(wal: Option<Arc<WalFlush>>, n: usize) -> Vec<Result<PublishResult>> {
        let (replies, answers): (Vec<_>, Vec<_>) = (0..n).map(|_| oneshot::channel()).unzip();
        answer_once_durable(wal, replies, (0..n).map(|i| published(&format!("e{i}"))).collect());
        futures::future::join_all(answers).await.into_iter().map(|answer| answer.unwrap()).collect()
    }

    #[tokio::test]
    async fn a_batch_is_answered_after_one_flush_of_its_commit() {
        let (wal, dir) = WalFlush::in_temp_dir("herald-intake-flush");
        let wal = Arc::new(wal);
        let answers = answered(Some(wal.clone()), 3).await;
        let ids: Vec<_> = answers.into_iter().map(|a| a.unwrap().events[0].id.clone()).collect();
        assert_eq!(ids, ["e0", "e1", "e2"]);
        assert_eq!(wal.flushes(), 1, "one flush for the batch, not one per request");
        std::fs::remove_dir_all(&dir).unwrap();

        // Without a flush of Herald's own (PostgreSQL, `normal`), the answers go at once.
        assert!(answered(None, 2).await.iter().all(|a| a.is_ok()));
    }

    #[tokio::test]
    async fn a_batch_whose_flush_fails_is_answered_with_the_failure() {
        for answer in answered(Some(Arc::new(WalFlush::failing())), 2).await {
            let error = answer.unwrap_err();
            assert!(error.to_string().contains("flushing the write-ahead log"), "{error}");
        }
    }
}
