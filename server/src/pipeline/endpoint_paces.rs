//! Each endpoint's pace, when its subscription sets `rate_limit_per_sec`: attempts start at most
//! that many times a second. A message ahead of its endpoint's pace waits in the lane's queue,
//! leased and unattempted, until its turn (no attempt is spent and its schedule does not age),
//! and the lane wakes at that turn; other endpoints never wait for it.
//!
//! The pace is a generic cell rate (GCRA): the time the next attempt may start, moved on by one
//! interval per attempt. Attempts are spaced by that interval, so that no second holds more than
//! the rate; above 1000 a second, where the millisecond clock cannot space them, those of one
//! millisecond go together. Every process keeps its own pace: on PostgreSQL each of the `n`
//! processes alive takes `rate / n`, so that together they stay within the rate.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use domain::ids::EndpointId;
use foldhash::HashMap;

const MICROS_PER_SEC: i64 = 1_000_000;
const MICROS_PER_MS: i64 = 1_000;

/// `a / b` rounded up, for `b > 0`.
fn ceil_div(a: i64, b: i64) -> i64 {
    -((-a).div_euclid(b))
}

/// Turns of each paced endpoint, shared by both lanes (retries and first attempts keep one pace).
#[derive(Clone)]
pub struct EndpointPaces {
    /// When each paced endpoint's next attempt may start, in microseconds.
    next: Arc<Mutex<HashMap<EndpointId, i64>>>,
    /// The processes that share each pace (1 on SQLite).
    sharing: Arc<AtomicUsize>,
}

impl Default for EndpointPaces {
    fn default() -> EndpointPaces {
        EndpointPaces { next: Arc::default(), sharing: Arc::new(AtomicUsize::new(1)) }
    }
}

impl EndpointPaces {
    /// The number of processes alive, which share every endpoint's pace.
    pub fn shared_by(&self, processes: usize) {
        self.sharing.store(processes.max(1), Ordering::Relaxed);
    }

    /// This process's interval between attempts at `per_sec`, in microseconds.
    fn interval_us(&self, per_sec: u32) -> i64 {
        let share = self.sharing.load(Ordering::Relaxed) as i64;
        ceil_div(MICROS_PER_SEC * share, i64::from(per_sec.max(1)))
    }

    /// Takes a turn at `endpoint_id`, paced at `per_sec` attempts a second (`None`: not paced):
    /// `Ok` when an attempt may start now, else the millisecond of its next turn.
    pub fn take(&self, endpoint_id: &EndpointId, per_sec: Option<u32>, now_ms: i64) -> Result<(), i64> {
        let Some(per_sec) = per_sec else { return Ok(()) };
        let interval = self.interval_us(per_sec);
        // The clock counts milliseconds: an attempt starts up to one late, which the next turn
        // does not add to; and a pace faster than one a millisecond lets a millisecond's go together.
        let late = MICROS_PER_MS - 1;
        let together = if interval < MICROS_PER_MS { late } else { 0 };
        let now = now_ms * MICROS_PER_MS;
        let mut next = self.next.lock().expect("paces lock");
        let turn = next.get(endpoint_id).map_or(now, |turn| (*turn).max(now - late));
        if turn > now + together {
            return Err(ceil_div(turn - together, MICROS_PER_MS));
        }
        next.insert(endpoint_id.clone(), turn + interval);
        Ok(())
    }

    /// Forgets the endpoints whose turn is past: they start afresh, and the map holds only
    /// the endpoints paced lately.
    pub fn forget_past(&self, now_ms: i64) {
        let now = now_ms * MICROS_PER_MS;
        self.next.lock().expect("paces lock").retain(|_, turn| *turn > now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The millisecond of every start over `ms`, with a message always waiting.
    fn starts(paces: &EndpointPaces, per_sec: u32, ms: i64) -> Vec<i64> {
        let endpoint = EndpointId::from("ep_a");
        let mut started = Vec::new();
        for now in 0..ms {
            while paces.take(&endpoint, Some(per_sec), now).is_ok() {
                started.push(now);
            }
        }
        started
    }

    #[test]
    fn attempts_are_spaced_so_that_no_second_holds_more_than_the_rate() {
        let paces = EndpointPaces::default();
        let endpoint = EndpointId::from("ep_a");
        assert_eq!(paces.take(&endpoint, Some(2), 0), Ok(()));
        assert_eq!(paces.take(&endpoint, Some(2), 0), Err(500), "the next turn is half a second later");
        assert_eq!(paces.take(&endpoint, Some(2), 499), Err(500));
        assert_eq!(paces.take(&endpoint, Some(2), 500), Ok(()));
        assert_eq!(paces.take(&EndpointId::from("ep_b"), Some(2), 500), Ok(()), "each endpoint has its own");
        assert_eq!(paces.take(&endpoint, None, 500), Ok(()), "an unpaced subscription is not held");

        for per_sec in [1, 7, 50, 999, 1000, 2500, 10_000] {
            let started = starts(&EndpointPaces::default(), per_sec, 3000);
            let rate = per_sec as usize;
            assert!(started.len() + 3 >= 3 * rate && started.len() <= 3 * rate + 1, "{per_sec}: {}", started.len());
            // Every window of a second, however it falls.
            for from in 0..2000 {
                let within = started.iter().filter(|at| (from..from + 1000).contains(*at)).count();
                assert!(within <= rate + 1, "{per_sec} a second: {within} from {from} ms");
            }
        }
    }

    #[test]
    fn processes_that_share_a_pace_each_take_their_part() {
        let paces = EndpointPaces::default();
        paces.shared_by(2);
        assert_eq!(starts(&paces, 50, 1000).len(), 25);
        paces.shared_by(0);
        assert_eq!(paces.interval_us(50), 20_000, "at least this process shares it");
    }

    #[test]
    fn endpoints_whose_turn_is_past_are_forgotten() {
        let paces = EndpointPaces::default();
        paces.take(&"ep_a".into(), Some(1), 0).unwrap();
        paces.forget_past(999);
        assert_eq!(paces.next.lock().unwrap().len(), 1);
        paces.forget_past(1000);
        assert!(paces.next.lock().unwrap().is_empty());
    }
}
