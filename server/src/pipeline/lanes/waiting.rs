//! Leased messages waiting for a permit at their endpoint, in the order they
//! came. A claim, or a publish handing its messages over, may bring more
//! messages for an endpoint than it has free permits; they wait here rather than
//! going back to the database, and start as the endpoint's attempts finish.
//! None waits longer than `MAX_WAIT_MS`.

use std::collections::VecDeque;

use domain::ids::EndpointId;
use foldhash::HashMap;

use crate::pipeline::handoff::{QueuePermit, Ready, StartPermit};
use crate::pipeline::job::Job;

/// How long a message may wait for its endpoint before it goes back
/// to the database (well inside its lease).
pub const MAX_WAIT_MS: i64 = 10_000;

/// A waiting message, since when, and its permit in the lane's queue when it was handed over.
type Entry = (Job, i64, Option<QueuePermit>);

#[derive(Default)]
pub struct Waiting {
    queues: HashMap<EndpointId, VecDeque<Entry>>,
    total: usize,
}

impl Waiting {
    pub fn len(&self) -> usize {
        self.total
    }

    /// How many messages wait for `endpoint_id`.
    pub fn of(&self, endpoint_id: &str) -> usize {
        self.queues.get(endpoint_id).map_or(0, VecDeque::len)
    }

    /// A claimed message.
    pub fn push(&mut self, job: Job, now_ms: i64) {
        self.push_entry((job, now_ms, None));
    }

    /// A handed-over message, holding its permit in the lane's queue until it leaves.
    pub fn push_handed(&mut self, job: Job, now_ms: i64, queued: QueuePermit) {
        self.push_entry((job, now_ms, Some(queued)));
    }

    fn push_entry(&mut self, entry: Entry) {
        self.queues.entry(entry.0.message.endpoint_id.clone()).or_default().push_back(entry);
        self.total += 1;
    }

    /// How many wait for unsaturated endpoints (fewer than `concurrency` waiting):
    /// the messages claims should keep coming for, as a saturated endpoint's queue
    /// must not hold up the others'.
    pub fn unsaturated(&self, concurrency: usize) -> usize {
        self.queues.values().map(VecDeque::len).filter(|&n| n < concurrency).sum()
    }

    /// Saturated endpoints (at least `concurrency` messages waiting), which a claim should pass over.
    pub fn saturated(&self, concurrency: usize) -> Vec<EndpointId> {
        self.queues.iter().filter(|(_, q)| q.len() >= concurrency).map(|(id, _)| id.clone()).collect()
    }

    /// The messages that can start now: for each endpoint, as many as `permit` grants.
    pub fn start(&mut self, mut permit: impl FnMut(&EndpointId) -> Option<StartPermit>) -> Vec<Ready> {
        let mut ready = Vec::new();
        for (endpoint_id, queue) in self.queues.iter_mut() {
            while !queue.is_empty() {
                let Some(permit) = permit(endpoint_id) else { break };
                let (job, _, _queued) = queue.pop_front().expect("the queue is not empty");
                ready.push(Ready { job, permit });
            }
        }
        self.total -= ready.len();
        self.queues.retain(|_, q| !q.is_empty());
        ready
    }

    /// Takes out the messages that have waited `MAX_WAIT_MS` or more, or all of them.
    pub fn expired(&mut self, now_ms: i64, all: bool) -> Vec<Job> {
        let mut out = Vec::new();
        for queue in self.queues.values_mut() {
            while queue.front().is_some_and(|(_, since, _)| all || now_ms - since >= MAX_WAIT_MS) {
                out.push(queue.pop_front().expect("the queue is not empty").0);
            }
        }
        self.total -= out.len();
        self.queues.retain(|_, q| !q.is_empty());
        out
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::Semaphore;

    use super::*;
    use domain::ids::MessageId;

    use crate::pipeline::endpoint_permits::EndpointPermits;
    use crate::pipeline::handoff::take_start_permit;
    use crate::store::entities::message;

    fn job(id: &str, endpoint_id: &str) -> Job {
        let message = message::Model::leased_sample(id, endpoint_id);
        Job { message, subscription: None, event: None, endpoint: None }
    }

    fn ids(ready: &[Ready]) -> Vec<&str> {
        ready.iter().map(|r| r.job.message.id.as_str()).collect()
    }

    #[test]
    fn messages_start_in_claim_order_as_their_endpoint_has_permits() {
        let workers = Arc::new(Semaphore::new(100));
        let endpoint_permits = EndpointPermits::new(2);
        let mut waiting = Waiting::default();
        for id in ["a1", "a2", "a3"] {
            waiting.push(job(id, "ep_a"), 0);
        }
        waiting.push(job("b1", "ep_b"), 0);
        assert_eq!(waiting.saturated(3), vec![EndpointId::from("ep_a")]);
        assert_eq!(waiting.unsaturated(3), 1, "only ep_b's message counts against the next claim");

        let mut first = waiting.start(|ep| take_start_permit(&workers, &endpoint_permits, ep));
        first.sort_by(|x, y| x.job.message.id.cmp(&y.job.message.id));
        assert_eq!(ids(&first), ["a1", "a2", "b1"], "ep_a has two permits");
        assert_eq!(waiting.len(), 1);
        assert!(
            waiting.start(|ep| take_start_permit(&workers, &endpoint_permits, ep)).is_empty(),
            "ep_a is at its limit"
        );

        drop(first.remove(0));
        assert_eq!(ids(&waiting.start(|ep| take_start_permit(&workers, &endpoint_permits, ep))), ["a3"]);
        assert_eq!(waiting.len(), 0);
    }

    #[test]
    fn no_message_starts_without_a_free_worker() {
        let workers = Arc::new(Semaphore::new(1));
        let endpoint_permits = EndpointPermits::new(10);
        let mut waiting = Waiting::default();
        waiting.push(job("a1", "ep_a"), 0);
        waiting.push(job("a2", "ep_a"), 0);
        let started = waiting.start(|ep| take_start_permit(&workers, &endpoint_permits, ep));
        assert_eq!(ids(&started), ["a1"]);
        assert_eq!(waiting.len(), 1);
    }

    #[test]
    fn a_message_goes_back_after_waiting_too_long() {
        let mut waiting = Waiting::default();
        waiting.push(job("old", "ep_a"), 0);
        waiting.push(job("new", "ep_a"), 5_000);
        assert!(waiting.expired(MAX_WAIT_MS - 1, false).is_empty());
        let expired: Vec<MessageId> = waiting.expired(MAX_WAIT_MS, false).into_iter().map(|j| j.message.id).collect();
        assert_eq!(expired, ["old"]);
        let rest: Vec<MessageId> = waiting.expired(MAX_WAIT_MS, true).into_iter().map(|j| j.message.id).collect();
        assert_eq!(rest, ["new"]);
        assert_eq!(waiting.len(), 0);
    }
}
