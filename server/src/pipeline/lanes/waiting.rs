//! Leased messages waiting for a permit at their endpoint, in the order they
//! came. A claim, or a publish handing its messages over, may bring more
//! messages for an endpoint than it has free permits; they wait here rather than
//! going back to the database, and start as the endpoint's attempts finish
//! and, for a paced endpoint, as its turns come. None waits longer than `MAX_WAIT_MS`.

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

    /// The messages that can start now: for each endpoint, in order, as many as `permit` grants
    /// and `pace` gives a turn (or says when the next one is); with them, the earliest turn a
    /// message waits for.
    pub fn start(
        &mut self,
        mut permit: impl FnMut(&EndpointId) -> Option<StartPermit>,
        mut pace: impl FnMut(&Job) -> Result<(), i64>,
    ) -> (Vec<Ready>, Option<i64>) {
        let (mut ready, mut next_turn) = (Vec::new(), None::<i64>);
        for (endpoint_id, queue) in self.queues.iter_mut() {
            while let Some((job, _, _)) = queue.front() {
                let Some(permit) = permit(endpoint_id) else { break };
                if let Err(turn) = pace(job) {
                    next_turn = Some(next_turn.map_or(turn, |next| next.min(turn)));
                    break;
                }
                let (job, _, _queued) = queue.pop_front().expect("the queue is not empty");
                ready.push(Ready { job, permit });
            }
        }
        self.total -= ready.len();
        self.queues.retain(|_, q| !q.is_empty());
        (ready, next_turn)
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

        let mut first = waiting.start(|ep| take_start_permit(&workers, &endpoint_permits, ep), |_| Ok(())).0;
        first.sort_by(|x, y| x.job.message.id.cmp(&y.job.message.id));
        assert_eq!(ids(&first), ["a1", "a2", "b1"], "ep_a has two permits");
        assert_eq!(waiting.len(), 1);
        assert!(
            waiting.start(|ep| take_start_permit(&workers, &endpoint_permits, ep), |_| Ok(())).0.is_empty(),
            "ep_a is at its limit"
        );

        drop(first.remove(0));
        assert_eq!(ids(&waiting.start(|ep| take_start_permit(&workers, &endpoint_permits, ep), |_| Ok(())).0), ["a3"]);
        assert_eq!(waiting.len(), 0);
    }

    #[test]
    fn no_message_starts_without_a_free_worker() {
        let workers = Arc::new(Semaphore::new(1));
        let endpoint_permits = EndpointPermits::new(10);
        let mut waiting = Waiting::default();
        waiting.push(job("a1", "ep_a"), 0);
        waiting.push(job("a2", "ep_a"), 0);
        let started = waiting.start(|ep| take_start_permit(&workers, &endpoint_permits, ep), |_| Ok(())).0;
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

    #[test]
    fn a_paced_endpoint_starts_on_its_turns_and_holds_up_no_other() {
        use crate::pipeline::endpoint_paces::EndpointPaces;

        let workers = Arc::new(Semaphore::new(100));
        let endpoint_permits = EndpointPermits::new(10);
        let paces = EndpointPaces::default();
        let mut waiting = Waiting::default();
        for id in ["a1", "a2", "a3"] {
            waiting.push(job(id, "ep_a"), 0);
        }
        waiting.push(job("b1", "ep_b"), 0);
        let start_at = |waiting: &mut Waiting, now: i64| {
            let pace = |job: &Job| {
                let paced = (job.message.endpoint_id.as_str() == "ep_a").then_some(2);
                paces.take(&job.message.endpoint_id, paced, now)
            };
            let (mut ready, next) = waiting.start(|ep| take_start_permit(&workers, &endpoint_permits, ep), pace);
            ready.sort_by(|x, y| x.job.message.id.cmp(&y.job.message.id));
            (ids(&ready).into_iter().map(str::to_string).collect::<Vec<_>>(), next)
        };
        assert_eq!(start_at(&mut waiting, 0), (vec!["a1".to_string(), "b1".to_string()], Some(500)));
        assert_eq!(start_at(&mut waiting, 499), (vec![], Some(500)), "a2 waits for its turn");
        assert_eq!(start_at(&mut waiting, 500), (vec!["a2".to_string()], Some(1000)));
        assert_eq!(waiting.len(), 1);
    }
}
