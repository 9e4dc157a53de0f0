//! Fresh messages handed from the publish transaction straight to the fresh
//! lane. When the lane has a free worker and the endpoint a free slot, the
//! publish stores the message already leased and, once committed, passes it
//! over in memory: no claim, no second read. Anything else waits in the
//! database for the lane's claim, and a handed-over message whose process dies
//! is reclaimed when its lease ends, like any claimed one.

use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::Wakeup;
use super::busy::{EndpointSlots, Slot};
use super::deliver::Job;

/// A reserved place in the fresh lane: one of its workers and one of the
/// endpoint's slots. Dropping it frees both.
pub struct Place {
    pub(super) permit: OwnedSemaphorePermit,
    pub(super) slot: Slot,
}

impl Place {
    /// Frees the endpoint's slot, and wakes the lanes when the endpoint was
    /// full, as messages may be waiting for it. The worker stays taken until
    /// the attempt is recorded, so that no more attempts than the lane's
    /// concurrency are ever sent and not yet recorded (a crash repeats at most those).
    pub(super) fn free_slot(self, wake: &Wakeup) -> OwnedSemaphorePermit {
        if self.slot.release() {
            wake.room();
        }
        self.permit
    }
}

/// A committed, leased message with its place, ready to be sent.
pub struct Ready {
    pub job: Job,
    pub place: Place,
}

/// One of the lane's `permits` and one of the endpoint's slots, or nothing.
pub(super) fn take_place(permits: &Arc<Semaphore>, slots: &EndpointSlots, endpoint_id: &str) -> Option<Place> {
    let permit = permits.clone().try_acquire_owned().ok()?;
    let slot = slots.try_take(endpoint_id)?;
    Some(Place { permit, slot })
}

#[derive(Clone)]
struct Link {
    permits: Arc<Semaphore>,
    slots: EndpointSlots,
    ready: mpsc::UnboundedSender<Ready>,
}

/// The door between publishing and the fresh lane; closed while no lane runs
/// (and in tests that drive the worker by hand), so every message is stored pending.
#[derive(Default)]
pub struct Handoff {
    link: Mutex<Option<Link>>,
}

impl Handoff {
    /// Opens the door for a running fresh lane; it receives what is handed over.
    pub(super) fn open(&self, permits: Arc<Semaphore>, slots: EndpointSlots) -> mpsc::UnboundedReceiver<Ready> {
        let (ready, incoming) = mpsc::unbounded_channel();
        *self.link.lock().expect("handoff lock") = Some(Link { permits, slots, ready });
        incoming
    }

    pub(super) fn close(&self) {
        self.link.lock().expect("handoff lock").take();
    }

    pub fn is_open(&self) -> bool {
        self.link.lock().expect("handoff lock").is_some()
    }

    /// A place for one message to `endpoint_id`, when the lane runs and has room.
    pub fn reserve(&self, endpoint_id: &str) -> Option<Place> {
        let link = self.link.lock().expect("handoff lock").clone()?;
        take_place(&link.permits, &link.slots, endpoint_id)
    }

    /// Passes a committed message to the lane. If the lane has stopped
    /// meanwhile, the message stays leased and is retried when the lease ends.
    pub fn start(&self, ready: Ready) {
        let link = self.link.lock().expect("handoff lock").clone();
        if let Some(link) = link {
            if let Err(lost) = link.ready.send(ready) {
                tracing::warn!(message_id = %lost.0.job.message.id, "the fresh lane stopped; the message is retried after its lease");
            }
        }
    }
}
