//! The two lanes (first attempts, and retries): each claims due messages in
//! batches and delivers them concurrently within its own budget, so a retry
//! backlog never delays a fresh message; each endpoint also has a budget of its
//! own, so a slow receiver never takes every worker. The fresh lane also takes
//! the messages the intake hands over.

mod claim_planner;
mod waiting;

use std::sync::Arc;
use std::time::Duration;

use domain::ids::{EndpointId, EventId, MessageId, SubscriptionId};
use foldhash::{HashMap, HashMapExt};
use sea_orm::{DbErr, TransactionTrait};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use super::deliver::Deliverer;
use super::endpoint_permits::{EndpointPermit, EndpointPermits};
use super::handoff::{Dispatch, Ready, StartPermit, take_start_permit};
use super::job::Job;
use super::operational::report_dead;
use super::{Pipeline, lease_ms, wakeup};
use crate::store::entities::{endpoint, event, message, subscription};
use crate::store::messages::{Among, Lane};
use crate::store::{endpoints, events, messages, processes, subscriptions};
use claim_planner::{ClaimPlanner, ClaimScope};
use waiting::Waiting;

/// The longest a lane sleeps when nothing wakes it.
const IDLE_POLL: Duration = Duration::from_secs(1);
/// At most this many messages per claim statement.
const CLAIM_BATCH: u64 = 128;
/// A lane claims only while fewer messages than this wait for their endpoints;
/// the fresh lane's queue for handed-over messages has the same size.
const MAX_WAITING: usize = 16 * CLAIM_BATCH as usize;
/// Handed-over messages that may wait for one endpoint, per unit of its concurrency.
const HANDED_PER_PERMIT: usize = 16;
/// How long a message waits when its endpoint was at its concurrency limit.
const PUT_BACK_MS: i64 = 200;

#[derive(Clone)]
pub struct Lanes {
    pipeline: Pipeline,
    endpoint_permits: EndpointPermits,
    deliverer: Arc<Deliverer>,
}

impl Lanes {
    pub fn new(pipeline: Pipeline) -> Lanes {
        let endpoint_permits = EndpointPermits::new(pipeline.settings.delivery.endpoint_concurrency);
        let deliverer = Arc::new(Deliverer::new(pipeline.clone()));
        Lanes { pipeline, endpoint_permits, deliverer }
    }

    /// Runs both lanes until `shutdown` turns true, then lets in-flight
    /// deliveries finish (unfinished ones are released by their lease).
    pub async fn run(self, shutdown: watch::Receiver<bool>) {
        let delivery = &self.pipeline.settings.delivery;
        let fresh = tokio::spawn(self.clone().run_lane(Lane::Fresh, delivery.fresh_concurrency, shutdown.clone()));
        let retry = tokio::spawn(self.clone().run_lane(Lane::Retry, delivery.retry_concurrency, shutdown.clone()));
        let p = &self.pipeline;
        let listener = tokio::spawn(wakeup::listen(p.db.clone(), p.health.clone(), p.wake.clone(), shutdown));
        let _ = tokio::join!(fresh, retry, listener);
    }

    async fn run_lane(self, lane: Lane, workers: usize, mut shutdown: watch::Receiver<bool>) {
        let workers = Arc::new(Semaphore::new(workers));
        // The fresh lane also takes messages straight from the intake, their permits already reserved.
        let mut handed = (lane == Lane::Fresh).then(|| {
            let per_endpoint = HANDED_PER_PERMIT * self.pipeline.settings.delivery.endpoint_concurrency;
            self.pipeline.handoff.open(workers.clone(), self.endpoint_permits.clone(), MAX_WAITING, per_endpoint)
        });
        let mut in_flight = JoinSet::new();
        let mut waiting = Waiting::default();
        let mut last_sweep = 0i64;
        let mut planner = ClaimPlanner::default();
        let mut claiming: Option<Claiming<(ClaimPlan, Vec<Job>)>> = None;
        while !*shutdown.borrow() {
            while in_flight.try_join_next().is_some() {}
            while let Some(one) = handed.as_mut().and_then(|h| h.try_recv().ok()) {
                self.receive(one, &mut in_flight, &mut waiting);
            }
            let now = self.pipeline.now_ms();
            let permit = |endpoint_id: &EndpointId| take_start_permit(&workers, &self.endpoint_permits, endpoint_id);
            let (ready, next_turn) = waiting.start(permit, |job| self.take_turn(job, now));
            for ready in ready {
                self.start(&mut in_flight, ready);
            }
            if lane == Lane::Fresh {
                planner.backlog(self.pipeline.wake.take_backlog());
            }
            let now = self.pipeline.now_ms();
            self.put_back(waiting.expired(now, false)).await;
            if lane == Lane::Retry && now - last_sweep >= IDLE_POLL.as_millis() as i64 {
                last_sweep = now;
                self.expire_held().await;
                self.pipeline.paces.forget_past(now);
            }
            if claiming.is_none() {
                claiming = self.plan_claim(&workers, &waiting, &mut planner, now).map(|plan| {
                    let (lanes, shutdown) = (self.clone(), shutdown.clone());
                    Claiming::start(async move { lanes.claim_planned(lane, plan, shutdown).await })
                });
            }
            let now = self.pipeline.now_ms();
            let sleep = planner.sleep_ms(now).map_or(IDLE_POLL, Duration::from_millis);
            // A paced endpoint's message starts at its turn.
            let sleep = next_turn.map_or(sleep, |turn| sleep.min(Duration::from_millis((turn - now).max(0) as u64)));
            tokio::select! {
                // A delivery ended: waiting messages may start.
                Some(_) = in_flight.join_next() => {}
                _ = self.pipeline.wake.nudge_of(lane).notified() => {}
                _ = self.pipeline.wake.of(lane).notified() => planner.woken(),
                // Checks again at the top of the loop when the timer has run out.
                _ = tokio::time::sleep(sleep) => {}
                Some(one) = next_handed(&mut handed) => self.receive(one, &mut in_flight, &mut waiting),
                (plan, jobs) = next_claimed(&mut claiming) => {
                    claiming = None;
                    self.claimed(lane, plan, jobs, &mut waiting, &mut planner);
                }
                _ = shutdown.changed() => {}
            }
        }
        // A claim under way finishes, so that its messages are put back rather than left leased.
        if let Some(mut claim) = claiming {
            let (plan, jobs) = claim.finished().await;
            self.claimed(lane, plan, jobs, &mut waiting, &mut planner);
        }
        self.stop(lane, handed, in_flight, waiting).await;
    }

    /// What to claim now, if anything: everything due while fewer than half a batch wait for
    /// unsaturated endpoints, so claims keep pace with deliveries; messages queued for saturated
    /// endpoints (a slow receiver's) hold up no one else, up to a bound on what the lane keeps in
    /// memory. The claim runs beside the lane's loop, which meanwhile goes on starting the
    /// messages handed over and the paced turns: a claim waits for the database, behind the
    /// publishes and the records, and no delivery should wait with it.
    fn plan_claim(
        &self,
        workers: &Semaphore,
        waiting: &Waiting,
        planner: &mut ClaimPlanner,
        now: i64,
    ) -> Option<ClaimPlan> {
        let endpoint_concurrency = self.pipeline.settings.delivery.endpoint_concurrency;
        let free = workers.available_permits() as u64;
        let short_of_work = waiting.unsaturated(endpoint_concurrency) < CLAIM_BATCH as usize / 2;
        let scope = (free > 0 && waiting.len() < MAX_WAITING)
            .then(|| planner.next(now, waiting, endpoint_concurrency, short_of_work))
            .flatten()?;
        Some(ClaimPlan { scope, limit: free.min(CLAIM_BATCH), saturated: waiting.saturated(endpoint_concurrency), now })
    }

    /// Runs a planned claim. During an outage it waits for the database's return (its health
    /// probes it) instead of claiming again and again.
    async fn claim_planned(
        &self,
        lane: Lane,
        plan: ClaimPlan,
        mut shutdown: watch::Receiver<bool>,
    ) -> (ClaimPlan, Vec<Job>) {
        let among = match &plan.scope {
            ClaimScope::AllDue => Among::AllBut(&plan.saturated),
            ClaimScope::Endpoint(endpoint_id) => Among::Endpoint(endpoint_id),
        };
        let jobs = match self.claim(lane, plan.limit, among).await {
            Ok(jobs) => jobs,
            Err(e) => {
                let health = &self.pipeline.health;
                health.failed("claiming messages", &e);
                tokio::select! {
                    _ = health.back() => {}
                    _ = shutdown.wait_for(|stopped| *stopped) => {}
                }
                Vec::new()
            }
        };
        (plan, jobs)
    }

    /// Takes in what a claim brought, and tells the planner.
    fn claimed(&self, lane: Lane, plan: ClaimPlan, jobs: Vec<Job>, waiting: &mut Waiting, planner: &mut ClaimPlanner) {
        let endpoint_concurrency = self.pipeline.settings.delivery.endpoint_concurrency;
        // The retry lane sleeps until its next retry is due, at most the idle poll.
        let short = (jobs.len() as u64) < plan.limit;
        let idle = if lane == Lane::Retry && short { self.idle_for(plan.now) } else { IDLE_POLL };
        let got: Vec<EndpointId> = jobs.iter().map(|job| job.message.endpoint_id.clone()).collect();
        let next_claim = self.pipeline.now_ms() + idle.as_millis() as i64;
        planner.claimed(&plan.scope, &got, plan.limit as usize, endpoint_concurrency, plan.saturated, next_claim);
        jobs.into_iter().for_each(|job| waiting.push(job, plan.now));
    }

    /// At shutdown: handed-over messages are committed and leased, so those with a start permit
    /// are sent rather than left to wait out their lease, and the others are put back; then the
    /// deliveries in flight get `lease_grace_secs` to end.
    async fn stop(
        &self,
        lane: Lane,
        handed: Option<UnboundedReceiver<Dispatch>>,
        mut in_flight: JoinSet<()>,
        mut waiting: Waiting,
    ) {
        if let Some(mut handed) = handed {
            self.pipeline.handoff.close();
            while let Ok(one) = handed.try_recv() {
                self.receive(one, &mut in_flight, &mut waiting);
            }
        }
        self.put_back(waiting.expired(self.pipeline.now_ms(), true)).await;
        let deadline = Duration::from_secs(self.pipeline.settings.delivery.lease_grace_secs);
        if tokio::time::timeout(deadline, async { while in_flight.join_next().await.is_some() {} }).await.is_err() {
            tracing::warn!(?lane, "shutdown deadline passed; unfinished deliveries will be retried after their lease");
        }
    }

    /// A message from the publish: it starts now, or waits for its endpoint.
    fn receive(&self, handed: Dispatch, in_flight: &mut JoinSet<()>, waiting: &mut Waiting) {
        match handed {
            Dispatch::Start(ready) => self.start(in_flight, ready),
            Dispatch::Queue(job, queued) => waiting.push_handed(job, self.pipeline.now_ms(), queued),
        }
    }

    fn start(&self, in_flight: &mut JoinSet<()>, ready: Ready) {
        let deliverer = self.deliverer.clone();
        in_flight.spawn(async move { deliverer.deliver(ready.job, ready.permit).await });
    }

    /// How long a lane whose claim at `claimed_at` came back short may sleep:
    /// until the next retry this process scheduled after that claim, and never
    /// longer than the idle poll.
    fn idle_for(&self, claimed_at: i64) -> Duration {
        let now = self.pipeline.now_ms();
        match self.pipeline.wake.next_retry_after(claimed_at) {
            Some(due) => Duration::from_millis((due - now).clamp(1, IDLE_POLL.as_millis() as i64) as u64),
            None => IDLE_POLL,
        }
    }

    async fn expire_held(&self) {
        match self.expire_held_reported().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(expired = n, "held messages reached the end of their TTL"),
            Err(e) => self.pipeline.health.failed("expiring held messages", &e),
        }
    }

    /// Ends held messages past their TTL and reports their deaths, in one transaction.
    async fn expire_held_reported(&self) -> Result<usize, DbErr> {
        let p = &self.pipeline;
        let txn = p.db.begin().await?;
        let expired = messages::expire_held(&txn, p.now_ms()).await?;
        if expired.is_empty() {
            txn.rollback().await?;
            return Ok(0);
        }
        let announced = report_dead(p, &txn, &expired).await?;
        p.commit_and_wake(txn, announced.into()).await?;
        Ok(expired.len())
    }

    /// Claims and delivers one batch of a lane, waiting for every delivery,
    /// and expires held messages first. Tests drive the worker with this and a
    /// manual clock.
    pub async fn tick(&self, lane: Lane) -> Result<usize, DbErr> {
        self.expire_held().await;
        let jobs = self.claim(lane, CLAIM_BATCH, Among::AllBut(&self.endpoint_permits.at_limit())).await?;
        let count = jobs.len();
        let admitted = self.admit(jobs).await;
        let permits = Arc::new(Semaphore::new(admitted.len()));
        futures::future::join_all(admitted.into_iter().map(|(job, endpoint)| {
            let permit = permits.clone().try_acquire_owned().expect("one permit per admitted job");
            self.deliverer.deliver(job, StartPermit { worker: permit, endpoint })
        }))
        .await;
        Ok(count)
    }

    /// Gives each job a permit at its endpoint and, if it is paced, a turn; the others go back,
    /// due a moment later.
    async fn admit(&self, jobs: Vec<Job>) -> Vec<(Job, EndpointPermit)> {
        let mut admitted = Vec::with_capacity(jobs.len());
        let mut refused = Vec::new();
        let now = self.pipeline.now_ms();
        for job in jobs {
            match self.endpoint_permits.try_acquire(&job.message.endpoint_id) {
                Some(permit) if self.take_turn(&job, now).is_ok() => admitted.push((job, permit)),
                _ => refused.push(job),
            }
        }
        self.put_back(refused).await;
        admitted
    }

    /// A turn at the job's endpoint, when its subscription sets a pace; else when the next is.
    fn take_turn(&self, job: &Job, now: i64) -> Result<(), i64> {
        let per_sec = job.subscription.as_ref().and_then(|sub| sub.rate_limit_per_sec).map(|n| n as u32);
        self.pipeline.paces.take(&job.message.endpoint_id, per_sec, now)
    }

    /// Returns claimed messages to the database unattempted, due a moment later,
    /// so that a saturated endpoint's backlog is not claimed again and again
    /// ahead of other work. One statement per claim (lease token).
    async fn put_back(&self, jobs: Vec<Job>) {
        let mut by_token: HashMap<i64, (Vec<MessageId>, bool)> = HashMap::new();
        for job in jobs {
            let (ids, retries) = by_token.entry(job.message.lease_token.unwrap_or_default()).or_default();
            ids.push(job.message.id);
            *retries |= job.message.attempt_count > 0;
        }
        let now = self.pipeline.now_ms();
        for (token, (ids, retries)) in by_token {
            match messages::put_back(&self.pipeline.db, ids, token, now + PUT_BACK_MS, now).await {
                // The retry lane claims again when they are due; fresh ones are found by the fresh lane's poll.
                Ok(_) if retries => self.pipeline.wake.retry_at(now + PUT_BACK_MS),
                Ok(_) => {}
                Err(e) => self.pipeline.health.failed("putting back messages (they are retried after their lease)", &e),
            }
        }
    }

    /// Leases up to `limit` due messages of the lane, of the endpoints `among` names.
    async fn claim(&self, lane: Lane, limit: u64, among: Among<'_>) -> Result<Vec<Job>, DbErr> {
        let now = self.pipeline.now_ms();
        let token = processes::lease_token(self.pipeline.process);
        let lease_until = now + lease_ms(&self.pipeline.settings.delivery);
        let claimed = messages::claim(&self.pipeline.db, lane, now, limit, lease_until, token, among).await?;
        crate::telemetry::hot().claims(lane, !claimed.is_empty()).increment(1);
        if claimed.is_empty() {
            return Ok(Vec::new());
        }
        fn ids<Id: Clone + Ord>(claimed: &[message::Model], id: impl Fn(&message::Model) -> &Id) -> Vec<Id> {
            let mut ids: Vec<Id> = claimed.iter().map(|m| id(m).clone()).collect();
            ids.sort();
            ids.dedup();
            ids
        }
        let db = &self.pipeline.db;
        let subs: HashMap<SubscriptionId, Arc<subscription::Model>> =
            subscriptions::by_ids(db, ids(&claimed, |m| &m.subscription_id))
                .await?
                .into_iter()
                .map(|s| (s.id.clone(), Arc::new(s)))
                .collect();
        let evts: HashMap<EventId, Arc<event::Model>> = events::by_ids(db, ids(&claimed, |m| &m.event_id))
            .await?
            .into_iter()
            .map(|e| (e.id.clone(), Arc::new(e)))
            .collect();
        let eps: HashMap<EndpointId, Arc<endpoint::Model>> = endpoints::by_ids(db, ids(&claimed, |m| &m.endpoint_id))
            .await?
            .into_iter()
            .map(|e| (e.id.clone(), Arc::new(e)))
            .collect();
        Ok(claimed
            .into_iter()
            .map(|message| Job {
                subscription: subs.get(&message.subscription_id).cloned(),
                event: evts.get(&message.event_id).cloned(),
                endpoint: eps.get(&message.endpoint_id).cloned(),
                message,
            })
            .collect())
    }
}

/// A claim under way, run as a task of its own beside the lane's loop. The loop awaits the
/// database itself (putting messages back, expiring held ones): a claim that were one of the
/// loop's own futures would not be polled meanwhile, and the connection it holds between its
/// statements (SQLite's only one) would keep the loop's statement waiting until its acquire timed
/// out, reported as an outage.
struct Claiming<T>(tokio::task::JoinHandle<T>);

impl<T: Send + 'static> Claiming<T> {
    fn start(claim: impl std::future::Future<Output = T> + Send + 'static) -> Claiming<T> {
        Claiming(tokio::spawn(claim))
    }

    async fn finished(&mut self) -> T {
        (&mut self.0).await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }
}

/// A claim's scope and size, decided by the lane's loop.
struct ClaimPlan {
    scope: ClaimScope,
    limit: u64,
    /// The endpoints a claim of everything passes over.
    saturated: Vec<EndpointId>,
    /// When it was planned.
    now: i64,
}

/// What the claim under way brought, when it ends; never, while none is.
async fn next_claimed(claiming: &mut Option<Claiming<(ClaimPlan, Vec<Job>)>>) -> (ClaimPlan, Vec<Job>) {
    match claiming {
        Some(claim) => claim.finished().await,
        None => std::future::pending().await,
    }
}

/// The next message handed to the fresh lane; never, for the retry lane.
async fn next_handed(handed: &mut Option<UnboundedReceiver<Dispatch>>) -> Option<Dispatch> {
    match handed {
        Some(incoming) => incoming.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use sea_orm::{ConnectionTrait, TransactionTrait};

    use super::Claiming;
    use crate::config::SqliteSynchronous;

    #[tokio::test(flavor = "current_thread")]
    async fn a_claim_goes_on_while_the_loop_waits_for_the_database() {
        // SQLite: one connection, which the claim takes first and holds until it commits.
        let db = crate::store::connect("sqlite::memory:", SqliteSynchronous::Full).await.unwrap();
        let theirs = db.clone();
        let mut claim = Claiming::start(async move {
            let txn = theirs.begin().await.unwrap();
            txn.execute_unprepared("SELECT 1").await.unwrap();
            txn.commit().await.unwrap();
        });
        // The loop's select polls the claim once, then the loop runs a statement of its own.
        assert!(futures::poll!(std::pin::pin!(claim.finished())).is_pending());
        let own = db.begin().await.expect("the loop's statement waits for the claim to end, not for its own timeout");
        own.commit().await.unwrap();
        claim.finished().await;
    }
}
