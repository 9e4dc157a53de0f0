//! The delivery workers: two lanes (first attempts, and retries) each claim due
//! messages in batches and deliver them concurrently within their own budget,
//! so a retry backlog never delays a fresh message; each endpoint also has a
//! budget of its own, so a slow receiver never takes every worker.

mod busy;
mod decide;
mod deliver;
pub mod http;
mod record;
mod request;
pub mod resolver;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sea_orm::DbErr;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinSet;

use crate::state::AppState;
use crate::store::entities::{endpoint, event, subscription};
use crate::store::messages::Lane;
use crate::store::{self, endpoints, events, messages, subscriptions};
use busy::{EndpointSlots, Slot};
use deliver::Job;
use record::Recorder;

/// How long a claim may stay unfinished before another worker takes it over:
/// the longest timeout a subscription can have, plus the grace.
fn lease_ms(state: &AppState) -> i64 {
    60_000 + state.settings.delivery.lease_grace_secs as i64 * 1000
}

/// The longest the dispatcher sleeps when nothing wakes it.
const IDLE_POLL: Duration = Duration::from_secs(1);
/// At most this many messages per claim statement.
const CLAIM_BATCH: u64 = 128;
/// How long a message waits when its endpoint was at its concurrency limit.
const PUT_BACK_MS: i64 = 200;

/// Wakes the lanes; a permit is stored when a lane is busy, so no wake-up is lost.
#[derive(Default)]
pub struct Wakeup {
    fresh: Notify,
    retry: Notify,
}

impl Wakeup {
    pub fn notify_one(&self) {
        self.fresh.notify_one();
        self.retry.notify_one();
    }
    pub(crate) fn of(&self, lane: Lane) -> &Notify {
        match lane {
            Lane::Fresh => &self.fresh,
            Lane::Retry => &self.retry,
        }
    }
}

#[derive(Clone)]
pub struct Worker {
    state: AppState,
    client: reqwest::Client,
    slots: EndpointSlots,
    recorder: Recorder,
}

impl Worker {
    pub fn new(state: AppState) -> Worker {
        let client = http::client(state.settings.allow_private_targets);
        let slots = EndpointSlots::new(state.settings.delivery.endpoint_concurrency);
        let recorder = Recorder::spawn(state.clone());
        Worker { state, client, slots, recorder }
    }

    /// Runs both lanes until `shutdown` turns true, then lets in-flight
    /// deliveries finish (unfinished ones are released by their lease).
    pub async fn run(self, shutdown: watch::Receiver<bool>) {
        let delivery = &self.state.settings.delivery;
        let fresh = tokio::spawn(self.clone().run_lane(Lane::Fresh, delivery.fresh_concurrency, shutdown.clone()));
        let retry = tokio::spawn(self.clone().run_lane(Lane::Retry, delivery.retry_concurrency, shutdown.clone()));
        let listener = tokio::spawn(store::notify::listen(self.state.db.clone(), self.state.wake.clone(), shutdown));
        let _ = tokio::join!(fresh, retry, listener);
    }

    async fn run_lane(self, lane: Lane, concurrency: usize, mut shutdown: watch::Receiver<bool>) {
        let permits = Arc::new(Semaphore::new(concurrency));
        let mut in_flight = JoinSet::new();
        let mut last_sweep = 0i64;
        while !*shutdown.borrow() {
            while in_flight.try_join_next().is_some() {}
            if lane == Lane::Retry && self.state.now_ms() - last_sweep >= IDLE_POLL.as_millis() as i64 {
                last_sweep = self.state.now_ms();
                self.expire_held().await;
            }
            let free = permits.available_permits() as u64;
            let claimed = if free == 0 { Ok(Vec::new()) } else { self.claim(lane, free.min(CLAIM_BATCH)).await };
            let jobs = claimed.unwrap_or_else(|e| {
                tracing::error!(error = %e, ?lane, "claiming messages failed");
                Vec::new()
            });
            if jobs.is_empty() {
                if free == 0 {
                    // Saturated: wait for a delivery to finish rather than poll.
                    tokio::select! {
                        _ = in_flight.join_next() => {}
                        _ = shutdown.changed() => {}
                    }
                } else {
                    // Fresh messages always come with a wake-up; retries come due by the clock.
                    let idle = if lane == Lane::Retry { self.idle_for().await } else { IDLE_POLL };
                    tokio::select! {
                        _ = self.state.wake.of(lane).notified() => {}
                        _ = tokio::time::sleep(idle) => {}
                        _ = shutdown.changed() => {}
                    }
                }
                continue;
            }
            for (job, slot) in self.admit(jobs).await {
                let permit = permits.clone().acquire_owned().await.expect("the semaphore is never closed");
                let worker = self.clone();
                in_flight.spawn(async move {
                    worker.deliver(job).await;
                    if slot.release() {
                        // Both lanes may have passed over this endpoint while it was full.
                        worker.state.wake.notify_one();
                    }
                    drop(permit);
                });
            }
        }
        let deadline = Duration::from_secs(self.state.settings.delivery.lease_grace_secs);
        if tokio::time::timeout(deadline, async { while in_flight.join_next().await.is_some() {} }).await.is_err() {
            tracing::warn!(?lane, "shutdown deadline passed; unfinished deliveries will be retried after their lease");
        }
    }

    /// How long a lane with nothing due may sleep: until the next message is
    /// due, and never longer than the idle poll.
    async fn idle_for(&self) -> Duration {
        match messages::next_due_at(&self.state.db).await {
            Ok(Some(due)) => {
                let wait = (due - self.state.now_ms()).clamp(10, IDLE_POLL.as_millis() as i64);
                Duration::from_millis(wait as u64)
            }
            _ => IDLE_POLL,
        }
    }

    async fn expire_held(&self) {
        match messages::expire_held(&self.state.db, self.state.now_ms()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(expired = n, "held messages reached the end of their TTL"),
            Err(e) => tracing::error!(error = %e, "expiring held messages failed"),
        }
    }

    /// Claims and delivers one batch of a lane, waiting for every delivery,
    /// and expires held messages first. Tests drive the worker with this and a
    /// manual clock.
    pub async fn tick(&self, lane: Lane) -> Result<usize, DbErr> {
        self.expire_held().await;
        let jobs = self.claim(lane, CLAIM_BATCH).await?;
        let count = jobs.len();
        let admitted = self.admit(jobs).await;
        futures::future::join_all(admitted.into_iter().map(|(job, slot)| async move {
            self.deliver(job).await;
            slot.release();
        }))
        .await;
        Ok(count)
    }

    /// Gives each job a place at its endpoint. Jobs over their endpoint's limit
    /// go back in one statement, due a moment later, so that a saturated
    /// endpoint's backlog is not claimed again and again ahead of other work.
    async fn admit(&self, jobs: Vec<Job>) -> Vec<(Job, Slot)> {
        let mut admitted = Vec::with_capacity(jobs.len());
        let mut refused = Vec::new();
        for job in jobs {
            match self.slots.try_take(&job.message.endpoint_id) {
                Some(slot) => admitted.push((job, slot)),
                None => refused.push(job.message),
            }
        }
        if let Some(first) = refused.first() {
            let token = first.lease_token.unwrap_or_default();
            let ids = refused.iter().map(|m| m.id.clone()).collect();
            let now = self.state.now_ms();
            if let Err(e) = messages::put_back(&self.state.db, ids, token, now + PUT_BACK_MS, now).await {
                tracing::error!(error = %e, "putting back messages failed; they are retried after their lease");
            }
        }
        admitted
    }

    async fn claim(&self, lane: Lane, limit: u64) -> Result<Vec<Job>, DbErr> {
        let now = self.state.now_ms();
        let token = rand::random::<i64>().abs().max(1);
        let busy = self.slots.full();
        let claimed =
            messages::claim(&self.state.db, lane, now, limit, now + lease_ms(&self.state), token, &busy).await?;
        if claimed.is_empty() {
            return Ok(Vec::new());
        }
        let ids = |f: fn(&crate::store::entities::message::Model) -> &String| -> Vec<String> {
            let mut ids: Vec<String> = claimed.iter().map(|m| f(m).clone()).collect();
            ids.sort();
            ids.dedup();
            ids
        };
        let db = &self.state.db;
        let subs: HashMap<String, subscription::Model> = subscriptions::by_ids(db, ids(|m| &m.subscription_id))
            .await?
            .into_iter()
            .map(|s| (s.id.clone(), s))
            .collect();
        let evts: HashMap<String, event::Model> =
            events::by_ids(db, ids(|m| &m.event_id)).await?.into_iter().map(|e| (e.id.clone(), e)).collect();
        let eps: HashMap<String, endpoint::Model> =
            endpoints::by_ids(db, ids(|m| &m.endpoint_id)).await?.into_iter().map(|e| (e.id.clone(), e)).collect();
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
