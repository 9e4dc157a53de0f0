//! When, and for what, a lane asks the database for due messages. A claim
//! costs a write transaction, and a claim that passes over crowded endpoints
//! reads past their due messages, so the lane claims only when the database may
//! hold something for it:
//! - everything due (passing over crowded endpoints), while few messages wait
//!   for uncrowded endpoints, after a wake-up, after a full batch, or when its
//!   timer runs out (messages also come due by time);
//! - one endpoint's due messages when that endpoint, known to have more in the
//!   database, is running low: one the last claim passed over or brought a
//!   round of, or one this process just stored pending messages for. Such a
//!   claim reads that endpoint's index range and nothing else.

use std::collections::HashMap;

use super::waiting::Waiting;

/// What a lane claims next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Look {
    /// The oldest due messages, passing over crowded endpoints.
    Everything,
    /// The oldest due messages of one endpoint.
    Endpoint(String),
}

pub struct Lookout {
    look: bool,
    /// When the lane looks again without being woken, in clock milliseconds.
    look_at: i64,
    /// Endpoints the database may hold more due messages of (at most `MAX_BACKLOGGED`).
    backlogged: Vec<String>,
}

/// Endpoints the lookout keeps track of; beyond them, claims of everything due find the rest.
const MAX_BACKLOGGED: usize = 256;

impl Default for Lookout {
    fn default() -> Lookout {
        Lookout { look: true, look_at: i64::MIN, backlogged: Vec::new() }
    }
}

impl Lookout {
    /// Messages were made due for the lane, of endpoints unknown.
    pub fn woken(&mut self) {
        self.look = true;
    }

    /// Messages were stored due for these endpoints.
    pub fn backlog(&mut self, endpoints: impl IntoIterator<Item = String>) {
        for endpoint_id in endpoints {
            if self.backlogged.len() < MAX_BACKLOGGED && !self.backlogged.contains(&endpoint_id) {
                self.backlogged.push(endpoint_id);
            }
        }
    }

    /// What the lane should claim now, if anything, given what waits in it for each
    /// endpoint, the number of messages (`round`) that keeps one endpoint busy, and
    /// whether too few wait for uncrowded endpoints (`hungry`).
    pub fn next(&mut self, now_ms: i64, waiting: &Waiting, round: usize, hungry: bool) -> Option<Look> {
        if now_ms >= self.look_at {
            self.look = true;
        }
        if self.look && hungry {
            return Some(Look::Everything);
        }
        self.backlogged.iter().find(|ep| waiting.of(ep) < round).map(|ep| Look::Endpoint(ep.clone()))
    }

    /// A claim for `look` asked for `limit` messages and got those of `got`
    /// (their endpoints), passing over `crowded`. A full batch means there may
    /// be more; a short one means nothing else is due until `next_look_ms`,
    /// except for the endpoints it passed over.
    pub fn claimed(
        &mut self,
        look: &Look,
        got: &[String],
        limit: usize,
        round: usize,
        crowded: Vec<String>,
        next_look_ms: i64,
    ) {
        let full = got.len() == limit;
        match look {
            Look::Everything => {
                if full {
                    // More may be due, of these endpoints or of others. The endpoints that
                    // brought a round are refilled one by one: a claim of everything would
                    // pass over them, crowded now, reading past their backlog. The others'
                    // messages come with the next claim of everything, while the lane is hungry.
                    let mut counts: HashMap<&String, usize> = HashMap::new();
                    for endpoint_id in got {
                        *counts.entry(endpoint_id).or_default() += 1;
                    }
                    self.backlog(counts.into_iter().filter(|&(_, n)| n >= round).map(|(ep, _)| ep.clone()));
                } else {
                    self.look = false;
                    self.look_at = next_look_ms;
                }
                self.backlog(crowded);
            }
            Look::Endpoint(endpoint_id) if !full => self.backlogged.retain(|ep| ep != endpoint_id),
            Look::Endpoint(_) => {}
        }
    }

    /// How long the lane may sleep before its timer calls for a look; `None`
    /// while it already means to look.
    pub fn sleep_ms(&self, now_ms: i64) -> Option<u64> {
        (!self.look).then(|| (self.look_at - now_ms).max(0) as u64)
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

    fn of(endpoint_id: &str, n: usize) -> Vec<String> {
        vec![endpoint_id.to_string(); n]
    }

    #[test]
    fn a_short_claim_stops_looking_until_woken_or_the_timer() {
        let mut lookout = Lookout::default();
        let empty = Waiting::default();
        assert_eq!(lookout.next(0, &empty, 4, true), Some(Look::Everything), "a new lane looks at once");
        lookout.claimed(&Look::Everything, &of("ep_a", 3), 128, 4, Vec::new(), 1_000);
        assert_eq!(lookout.next(999, &empty, 4, true), None);
        assert_eq!(lookout.sleep_ms(400), Some(600), "the timer keeps its deadline across wake-ups of other kinds");
        assert_eq!(lookout.next(1_000, &empty, 4, true), Some(Look::Everything), "messages also come due by time");
        lookout.claimed(&Look::Everything, &[], 128, 4, Vec::new(), 2_000);
        lookout.woken();
        assert_eq!(lookout.next(1_001, &empty, 4, true), Some(Look::Everything));
        assert_eq!(lookout.sleep_ms(1_001), None);
    }

    #[test]
    fn a_full_batch_looks_again_while_the_lane_is_hungry() {
        let mut lookout = Lookout::default();
        lookout.claimed(&Look::Everything, &of("ep_a", 128), 128, 4, Vec::new(), 1_000);
        assert_eq!(lookout.next(1, &Waiting::default(), 4, true), Some(Look::Everything));
    }

    #[test]
    fn a_full_batch_of_a_crowded_endpoint_refills_only_that_endpoint() {
        let mut lookout = Lookout::default();
        lookout.claimed(&Look::Everything, &of("ep_a", 128), 128, 4, Vec::new(), 1_000);
        // ep_a has a round waiting, so the lane is not hungry: no claim reads past ep_a's backlog.
        assert_eq!(lookout.next(1, &waiting("ep_a", 4), 4, false), None);
        assert_eq!(lookout.next(2, &waiting("ep_a", 3), 4, false), Some(Look::Endpoint("ep_a".into())));
    }

    #[test]
    fn a_full_batch_spread_thin_over_endpoints_refills_none_of_them_alone() {
        let mut lookout = Lookout::default();
        let got: Vec<String> = (0..128).map(|i| format!("ep_{}", i % 64)).collect();
        lookout.claimed(&Look::Everything, &got, 128, 4, Vec::new(), 1_000);
        assert_eq!(lookout.next(1, &Waiting::default(), 4, false), None, "no endpoint brought a round");
        assert_eq!(lookout.next(1, &Waiting::default(), 4, true), Some(Look::Everything));
    }

    #[test]
    fn a_passed_over_endpoint_running_low_is_refilled_alone() {
        let mut lookout = Lookout::default();
        // The claim passed over ep_a, which had a full round waiting, and found nothing else.
        lookout.claimed(&Look::Everything, &[], 128, 4, vec!["ep_a".to_string()], 60_000);
        assert_eq!(lookout.next(10, &waiting("ep_a", 4), 4, true), None, "ep_a still has a round waiting");
        let refill = lookout.next(10, &waiting("ep_a", 3), 4, true);
        assert_eq!(refill, Some(Look::Endpoint("ep_a".into())), "ep_a's backlog must not wait for the timer");
        lookout.claimed(&Look::Endpoint("ep_a".into()), &of("ep_a", 128), 128, 4, Vec::new(), 60_000);
        assert!(lookout.next(11, &waiting("ep_a", 3), 4, true).is_some(), "a full refill may leave more");
        lookout.claimed(&Look::Endpoint("ep_a".into()), &of("ep_a", 5), 128, 4, Vec::new(), 60_000);
        assert_eq!(lookout.next(12, &waiting("ep_a", 3), 4, true), None, "a short refill emptied its backlog");
    }

    #[test]
    fn pending_messages_stored_for_an_endpoint_are_claimed_for_it_alone() {
        let mut lookout = Lookout::default();
        lookout.claimed(&Look::Everything, &[], 128, 4, Vec::new(), 60_000);
        lookout.backlog(["ep_b".to_string()]);
        assert_eq!(lookout.next(10, &Waiting::default(), 4, true), Some(Look::Endpoint("ep_b".into())));
    }
}
