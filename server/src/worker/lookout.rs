//! When a lane asks the database for due messages. A claim costs a write
//! transaction, so the lane claims only when the database may hold something
//! for it: after a wake-up, after a full batch, when its timer runs out
//! (messages also come due by time), or when an endpoint the last claim passed
//! over, because enough of its messages already waited, is running low.

use crate::worker::waiting::Waiting;

pub struct Lookout {
    look: bool,
    /// When the lane looks again without being woken, in clock milliseconds.
    look_at: i64,
    /// Endpoints the last short claim passed over; the database may hold more of theirs.
    passed_over: Vec<String>,
}

impl Default for Lookout {
    fn default() -> Lookout {
        Lookout { look: true, look_at: i64::MIN, passed_over: Vec::new() }
    }
}

impl Lookout {
    /// Messages were made due for the lane.
    pub fn woken(&mut self) {
        self.look = true;
    }

    /// Whether the lane should claim now, given what waits in it for each endpoint
    /// and the number of messages (`round`) that keeps one endpoint busy.
    pub fn should_look(&mut self, now_ms: i64, waiting: &Waiting, round: usize) -> bool {
        if now_ms >= self.look_at || self.passed_over.iter().any(|ep| waiting.of(ep) < round) {
            self.look = true;
        }
        self.look
    }

    /// A claim asked for `limit` messages, passing over `crowded`, and got `got`.
    /// A full batch means there may be more; a short one means nothing else is
    /// due until `next_look_ms`, except for the endpoints it passed over.
    pub fn claimed(&mut self, got: usize, limit: usize, crowded: Vec<String>, next_look_ms: i64) {
        self.look = got == limit;
        if self.look {
            self.passed_over.clear();
        } else {
            self.passed_over = crowded;
            self.look_at = next_look_ms;
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
    use crate::store::entities::message;
    use crate::worker::deliver::Job;

    fn waiting(endpoint_id: &str, n: usize) -> Waiting {
        let mut waiting = Waiting::default();
        for i in 0..n {
            let message = message::Model::leased_sample(&format!("m{i}"), endpoint_id);
            waiting.push(Job { message, subscription: None, event: None, endpoint: None }, 0);
        }
        waiting
    }

    #[test]
    fn a_short_claim_stops_looking_until_woken_or_the_timer() {
        let mut lookout = Lookout::default();
        let empty = Waiting::default();
        assert!(lookout.should_look(0, &empty, 4), "a new lane looks at once");
        lookout.claimed(3, 128, Vec::new(), 1_000);
        assert!(!lookout.should_look(999, &empty, 4));
        assert_eq!(lookout.sleep_ms(400), Some(600), "the timer keeps its deadline across wake-ups of other kinds");
        assert!(lookout.should_look(1_000, &empty, 4), "messages also come due by time");
        lookout.claimed(0, 128, Vec::new(), 2_000);
        lookout.woken();
        assert!(lookout.should_look(1_001, &empty, 4));
        assert_eq!(lookout.sleep_ms(1_001), None);
    }

    #[test]
    fn a_full_batch_looks_again() {
        let mut lookout = Lookout::default();
        lookout.claimed(128, 128, Vec::new(), 1_000);
        assert!(lookout.should_look(1, &Waiting::default(), 4));
    }

    #[test]
    fn a_passed_over_endpoint_running_low_is_a_reason_to_look() {
        let mut lookout = Lookout::default();
        // The claim passed over ep_a, which had a full round waiting, and found nothing else.
        lookout.claimed(0, 128, vec!["ep_a".to_string()], 60_000);
        assert!(!lookout.should_look(10, &waiting("ep_a", 4), 4), "ep_a still has a round waiting");
        assert!(
            lookout.should_look(10, &waiting("ep_a", 3), 4),
            "ep_a's backlog in the database must not wait for the timer"
        );
    }
}
