//! Fresh messages handed from the publish's write straight to the fresh
//! lane. While the lane has free permits, the publish stores the message already
//! leased and, once committed, passes it over in memory: no claim, no second
//! read. It starts at once when a worker and a permit of its endpoint are free;
//! otherwise it waits in the lane's queue for its endpoint, as claimed messages
//! do (a publish brings many messages for one endpoint at once). When the lane's
//! queue is full the message waits in the database for the lane's claim, and a
//! handed-over message whose process dies is reclaimed when its lease ends,
//! like any claimed one.

use std::sync::{Arc, Mutex};

use domain::ids::EndpointId;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::Wakeup;
use super::endpoint_permits::{EndpointPermit, EndpointPermits};
use super::job::Job;

/// What an attempt needs to start in a lane: one of its workers and one of the
/// endpoint's concurrency permits. Dropping it frees both.
pub struct StartPermit {
    pub(super) worker: OwnedSemaphorePermit,
    pub(super) endpoint: EndpointPermit,
}

impl StartPermit {
    /// Gives the endpoint's permit back, and wakes the lanes when the endpoint
    /// was at its limit, as messages may be waiting for it. Returns the lane's
    /// worker, which the attempt gives back once it has a permit among the
    /// attempts sent and not yet recorded.
    pub(super) fn release_endpoint(self, wake: &Wakeup) -> OwnedSemaphorePermit {
        if self.endpoint.release() {
            wake.permits_freed();
        }
        self.worker
    }
}

/// A committed, leased message with its start permit, ready to be sent.
pub struct Ready {
    pub job: Job,
    pub permit: StartPermit,
}

/// A permit of the lane's queue, and one of its endpoint's share of it, held by
/// a handed-over message until it starts or goes back to the database.
pub struct QueuePermit {
    _queue: OwnedSemaphorePermit,
    _endpoint: EndpointPermit,
}

/// What the publish reserved for a message before storing it leased.
pub enum Reservation {
    /// A worker and a permit of the endpoint: it starts at once.
    Start(StartPermit),
    /// The endpoint is busy: it waits in the lane's queue.
    Queue(QueuePermit),
}

/// A committed, leased message handed to the lane.
pub enum Dispatch {
    Start(Ready),
    Queue(Job, QueuePermit),
}

/// One of the lane's `workers` and one of the endpoint's permits, or nothing.
pub(super) fn take_start_permit(
    workers: &Arc<Semaphore>,
    endpoint_permits: &EndpointPermits,
    endpoint_id: &EndpointId,
) -> Option<StartPermit> {
    let worker = workers.clone().try_acquire_owned().ok()?;
    let endpoint = endpoint_permits.try_acquire(endpoint_id)?;
    Some(StartPermit { worker, endpoint })
}

struct Link {
    workers: Arc<Semaphore>,
    endpoint_permits: EndpointPermits,
    queue: Arc<Semaphore>,
    /// Queue permits per endpoint.
    queued: EndpointPermits,
    handed: mpsc::UnboundedSender<Dispatch>,
}

/// The door between publishing and the fresh lane; closed while no lane runs
/// (and in tests that drive the worker by hand), so every message is stored pending.
#[derive(Default)]
pub struct Handoff {
    link: Mutex<Option<Link>>,
}

impl Handoff {
    /// Opens the door for a running fresh lane, whose queue holds at most
    /// `queue` handed-over messages waiting for their endpoints, and at most
    /// `per_endpoint` for one endpoint, so that a slow endpoint's messages never
    /// fill it; the lane receives what is handed over.
    pub fn open(
        &self,
        workers: Arc<Semaphore>,
        endpoint_permits: EndpointPermits,
        queue: usize,
        per_endpoint: usize,
    ) -> mpsc::UnboundedReceiver<Dispatch> {
        let (handed, incoming) = mpsc::unbounded_channel();
        let queue = Arc::new(Semaphore::new(queue));
        let queued = EndpointPermits::new(per_endpoint);
        *self.link.lock().expect("handoff lock") = Some(Link { workers, endpoint_permits, queue, queued, handed });
        incoming
    }

    pub(super) fn close(&self) {
        self.link.lock().expect("handoff lock").take();
    }

    pub fn is_open(&self) -> bool {
        self.link.lock().expect("handoff lock").is_some()
    }

    /// Permits for one message to `endpoint_id`, when the lane runs and has any.
    pub fn reserve(&self, endpoint_id: &EndpointId) -> Option<Reservation> {
        let guard = self.link.lock().expect("handoff lock");
        let link = guard.as_ref()?;
        if let Some(permit) = take_start_permit(&link.workers, &link.endpoint_permits, endpoint_id) {
            return Some(Reservation::Start(permit));
        }
        let endpoint = link.queued.try_acquire(endpoint_id)?;
        let queue = link.queue.clone().try_acquire_owned().ok()?;
        Some(Reservation::Queue(QueuePermit { _queue: queue, _endpoint: endpoint }))
    }

    /// Passes a batch's committed messages to the lane. If the lane has stopped
    /// meanwhile, they stay leased and are retried when their lease ends.
    pub fn hand(&self, handed: Vec<Dispatch>) {
        let guard = self.link.lock().expect("handoff lock");
        let Some(link) = guard.as_ref() else { return };
        for one in handed {
            if let Err(lost) = link.handed.send(one) {
                let message_id = match &lost.0 {
                    Dispatch::Start(ready) => &ready.job.message.id,
                    Dispatch::Queue(job, _) => &job.message.id,
                };
                tracing::warn!(%message_id, "the fresh lane stopped; the message is retried after its lease");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_starts_when_permits_are_free_and_queues_while_its_endpoint_is_busy() {
        let handoff = Handoff::default();
        assert!(handoff.reserve(&"ep_a".into()).is_none(), "no lane runs: nothing is handed over");
        let _incoming = handoff.open(Arc::new(Semaphore::new(10)), EndpointPermits::new(1), 3, 2);
        let first = handoff.reserve(&"ep_a".into());
        assert!(matches!(first, Some(Reservation::Start(_))), "a worker and ep_a's one permit are free");
        let queued = handoff.reserve(&"ep_a".into());
        assert!(matches!(queued, Some(Reservation::Queue(_))), "ep_a is busy: the message waits in the lane");
        let _second = handoff.reserve(&"ep_a".into());
        assert!(
            handoff.reserve(&"ep_a".into()).is_none(),
            "ep_a has its share of the queue: the message stays in the database"
        );
        let _b = handoff.reserve(&"ep_b".into());
        let b_queued = handoff.reserve(&"ep_b".into());
        assert!(matches!(b_queued, Some(Reservation::Queue(_))), "ep_b queues in what is left");
        assert!(handoff.reserve(&"ep_b".into()).is_none(), "the lane's queue is full");
        assert!(
            matches!(handoff.reserve(&"ep_c".into()), Some(Reservation::Start(_))),
            "an idle endpoint still starts at once"
        );
        drop(queued);
        assert!(
            matches!(handoff.reserve(&"ep_a".into()), Some(Reservation::Queue(_))),
            "a queue permit frees when its message leaves the queue"
        );
        handoff.close();
        assert!(handoff.reserve(&"ep_b".into()).is_none());
    }
}
