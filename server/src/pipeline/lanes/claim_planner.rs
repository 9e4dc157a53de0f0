//! When, and for what, a lane claims due messages. A claim costs a write
//! transaction, and a claim that passes over saturated endpoints (those with a
//! full concurrency's worth of messages already waiting in the lane) reads past
//! their due messages, so the lane claims only when the database may hold
//! something for it:
//! - everything due (passing over saturated endpoints), while the lane is short
//!   of work (few messages wait for the other endpoints), after a wake-up, after
//!   a full batch, or when its timer runs out (messages also come due by time);
//! - one endpoint's due messages when that endpoint, known to have a backlog in
//!   the database, is running low: one the last claim passed over or brought a
//!   full concurrency's worth of, or one this process just stored pending
//!   messages for. Such a claim reads that endpoint's index range and nothing else.

use std::collections::HashMap;

use domain::ids::EndpointId;

use super::waiting::Waiting;

/// What a lane claims next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimScope {
    /// The oldest due messages, passing over saturated endpoints.
    AllDue,
    /// The oldest due messages of one endpoint.
    Endpoint(EndpointId),
}

pub struct ClaimPlanner {
    /// Whether the database may hold due messages of endpoints unknown.
    claim_all: bool,
    /// When the lane claims everything due again without being woken, in clock milliseconds.
    claim_all_at: i64,
    /// Endpoints the database may hold more due messages of (at most `MAX_BACKLOGGED`).
    backlogged: Vec<EndpointId>,
}

/// Endpoints the planner keeps track of; beyond them, claims of everything due find the rest.
const MAX_BACKLOGGED: usize = 256;

impl Default for ClaimPlanner {
    fn default() -> ClaimPlanner {
        ClaimPlanner { claim_all: true, claim_all_at: i64::MIN, backlogged: Vec::new() }
    }
}

impl ClaimPlanner {
    /// Messages were made due for the lane, of endpoints unknown.
    pub fn woken(&mut self) {
        self.claim_all = true;
    }

    /// Messages were stored due for these endpoints.
    pub fn backlog(&mut self, endpoints: impl IntoIterator<Item = EndpointId>) {
        for endpoint_id in endpoints {
            if self.backlogged.len() < MAX_BACKLOGGED && !self.backlogged.contains(&endpoint_id) {
                self.backlogged.push(endpoint_id);
            }
        }
    }

    /// What the lane should claim now, if anything, given what waits in it for each
    /// endpoint, the endpoint's concurrency (the messages that keep one endpoint
    /// busy), and whether too few wait for unsaturated endpoints (`short_of_work`).
    pub fn next(
        &mut self,
        now_ms: i64,
        waiting: &Waiting,
        concurrency: usize,
        short_of_work: bool,
    ) -> Option<ClaimScope> {
        if now_ms >= self.claim_all_at {
            self.claim_all = true;
        }
        if self.claim_all && short_of_work {
            return Some(ClaimScope::AllDue);
        }
        self.backlogged.iter().find(|ep| waiting.of(ep) < concurrency).map(|ep| ClaimScope::Endpoint(ep.clone()))
    }

    /// A claim of `scope` asked for `limit` messages and got those of `got`
    /// (their endpoints), passing over `saturated`. A full batch means there may
    /// be more; a short one means nothing else is due until `next_claim_ms`,
    /// except for the endpoints it passed over.
    pub fn claimed(
        &mut self,
        scope: &ClaimScope,
        got: &[EndpointId],
        limit: usize,
        concurrency: usize,
        saturated: Vec<EndpointId>,
        next_claim_ms: i64,
    ) {
        let full = got.len() == limit;
        match scope {
            ClaimScope::AllDue => {
                if full {
                    // More may be due, of these endpoints or of others. The endpoints that
                    // brought a full concurrency's worth are refilled one by one: a claim of
                    // everything would pass over them, saturated now, reading past their
                    // backlog. The others' messages come with the next claim of everything,
                    // while the lane is short of work.
                    let mut counts: HashMap<&EndpointId, usize> = HashMap::new();
                    for endpoint_id in got {
                        *counts.entry(endpoint_id).or_default() += 1;
                    }
                    self.backlog(counts.into_iter().filter(|&(_, n)| n >= concurrency).map(|(ep, _)| ep.clone()));
                } else {
                    self.claim_all = false;
                    self.claim_all_at = next_claim_ms;
                }
                self.backlog(saturated);
            }
            ClaimScope::Endpoint(endpoint_id) if !full => self.backlogged.retain(|ep| ep != endpoint_id),
            ClaimScope::Endpoint(_) => {}
        }
    }

    /// How long the lane may sleep before its timer calls for a claim; `None`
    /// while it already means to claim.
    pub fn sleep_ms(&self, now_ms: i64) -> Option<u64> {
        (!self.claim_all).then(|| (self.claim_all_at - now_ms).max(0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::job::Job;
    use crate::store::entities::message;

    fn waiting(endpoint_id: &str, n: usize) -> Waiting {
        let mut waiting = Waiting::default();
        for i in 0..n {
            let message = message::Model::leased_sample(&format!("m{i}"), endpoint_id);
            waiting.push(Job { message, subscription: None, event: None, endpoint: None }, 0);
        }
        waiting
    }

    fn of(endpoint_id: &str, n: usize) -> Vec<EndpointId> {
        vec![EndpointId::from(endpoint_id); n]
    }

    #[test]
    fn a_short_claim_stops_claiming_until_woken_or_the_timer() {
        let mut planner = ClaimPlanner::default();
        let empty = Waiting::default();
        assert_eq!(planner.next(0, &empty, 4, true), Some(ClaimScope::AllDue), "a new lane claims at once");
        planner.claimed(&ClaimScope::AllDue, &of("ep_a", 3), 128, 4, Vec::new(), 1_000);
        assert_eq!(planner.next(999, &empty, 4, true), None);
        assert_eq!(planner.sleep_ms(400), Some(600), "the timer keeps its deadline across wake-ups of other kinds");
        assert_eq!(planner.next(1_000, &empty, 4, true), Some(ClaimScope::AllDue), "messages also come due by time");
        planner.claimed(&ClaimScope::AllDue, &[], 128, 4, Vec::new(), 2_000);
        planner.woken();
        assert_eq!(planner.next(1_001, &empty, 4, true), Some(ClaimScope::AllDue));
        assert_eq!(planner.sleep_ms(1_001), None);
    }

    #[test]
    fn a_full_batch_claims_again_while_the_lane_is_short_of_work() {
        let mut planner = ClaimPlanner::default();
        planner.claimed(&ClaimScope::AllDue, &of("ep_a", 128), 128, 4, Vec::new(), 1_000);
        assert_eq!(planner.next(1, &Waiting::default(), 4, true), Some(ClaimScope::AllDue));
    }

    #[test]
    fn a_full_batch_of_a_saturated_endpoint_refills_only_that_endpoint() {
        let mut planner = ClaimPlanner::default();
        planner.claimed(&ClaimScope::AllDue, &of("ep_a", 128), 128, 4, Vec::new(), 1_000);
        // ep_a has its concurrency's worth waiting, so the lane is not short of work: no claim reads past ep_a's backlog.
        assert_eq!(planner.next(1, &waiting("ep_a", 4), 4, false), None);
        assert_eq!(planner.next(2, &waiting("ep_a", 3), 4, false), Some(ClaimScope::Endpoint("ep_a".into())));
    }

    #[test]
    fn a_full_batch_spread_thin_over_endpoints_refills_none_of_them_alone() {
        let mut planner = ClaimPlanner::default();
        let got: Vec<EndpointId> = (0..128).map(|i| EndpointId::from(format!("ep_{}", i % 64))).collect();
        planner.claimed(&ClaimScope::AllDue, &got, 128, 4, Vec::new(), 1_000);
        assert_eq!(planner.next(1, &Waiting::default(), 4, false), None, "no endpoint brought its concurrency's worth");
        assert_eq!(planner.next(1, &Waiting::default(), 4, true), Some(ClaimScope::AllDue));
    }

    #[test]
    fn a_passed_over_endpoint_running_low_is_refilled_alone() {
        let mut planner = ClaimPlanner::default();
        // The claim passed over ep_a, which had its concurrency's worth waiting, and found nothing else.
        planner.claimed(&ClaimScope::AllDue, &[], 128, 4, vec!["ep_a".into()], 60_000);
        assert_eq!(
            planner.next(10, &waiting("ep_a", 4), 4, true),
            None,
            "ep_a still has its concurrency's worth waiting"
        );
        let refill = planner.next(10, &waiting("ep_a", 3), 4, true);
        assert_eq!(refill, Some(ClaimScope::Endpoint("ep_a".into())), "ep_a's backlog must not wait for the timer");
        planner.claimed(&ClaimScope::Endpoint("ep_a".into()), &of("ep_a", 128), 128, 4, Vec::new(), 60_000);
        assert!(planner.next(11, &waiting("ep_a", 3), 4, true).is_some(), "a full refill may leave more");
        planner.claimed(&ClaimScope::Endpoint("ep_a".into()), &of("ep_a", 5), 128, 4, Vec::new(), 60_000);
        assert_eq!(planner.next(12, &waiting("ep_a", 3), 4, true), None, "a short refill emptied its backlog");
    }

    #[test]
    fn pending_messages_stored_for_an_endpoint_are_claimed_for_it_alone() {
        let mut planner = ClaimPlanner::default();
        planner.claimed(&ClaimScope::AllDue, &[], 128, 4, Vec::new(), 60_000);
        planner.backlog(["ep_b".into()]);
        assert_eq!(planner.next(10, &Waiting::default(), 4, true), Some(ClaimScope::Endpoint("ep_b".into())));
    }
}
