//! When the retry lane should claim next: the times of the retries this
//! process scheduled. Asking the database for its earliest due time would read
//! past every fresh message waiting in a backlog; retries scheduled by other
//! processes, and leases that run out, are found by the lane's idle poll.

use std::collections::BTreeSet;

/// Times closer than this share one entry: waking a few milliseconds late costs nothing.
const GRAIN_MS: i64 = 5;
/// The most times remembered; beyond it the latest are forgotten, for the poll to find.
const MAX_TIMES: usize = 10_000;

#[derive(Default)]
pub struct RetryTimes {
    times: BTreeSet<i64>,
}

impl RetryTimes {
    /// A retry is due at `at_ms`.
    pub fn add(&mut self, at_ms: i64) {
        let at = at_ms.div_euclid(GRAIN_MS) * GRAIN_MS + GRAIN_MS;
        self.times.insert(at);
        if self.times.len() > MAX_TIMES {
            self.times.pop_last();
        }
    }

    /// The earliest time after `now_ms`; times up to `now_ms` are forgotten, as
    /// the claim made at `now_ms` took what they made due.
    pub fn next_after(&mut self, now_ms: i64) -> Option<i64> {
        self.times = self.times.split_off(&(now_ms + 1));
        self.times.first().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_future_time_comes_first_and_past_ones_are_dropped() {
        let mut times = RetryTimes::default();
        for at in [10_000, 1_000, 5_000] {
            times.add(at);
        }
        assert_eq!(times.next_after(0), Some(1_005));
        assert_eq!(times.next_after(1_005), Some(5_005));
        assert_eq!(times.next_after(20_000), None);
        assert!(times.times.is_empty());
    }

    #[test]
    fn a_time_is_never_rounded_earlier() {
        let mut times = RetryTimes::default();
        times.add(1_001);
        times.add(1_004);
        let at = times.next_after(0).unwrap();
        assert!((1_004..1_004 + 2 * GRAIN_MS).contains(&at), "{at}");
        assert_eq!(times.times.len(), 1, "close times share an entry");
    }

    #[test]
    fn the_latest_times_are_forgotten_beyond_the_bound() {
        let mut times = RetryTimes::default();
        for i in 0..(MAX_TIMES as i64 + 50) {
            times.add(i * 1_000);
        }
        assert_eq!(times.times.len(), MAX_TIMES);
        assert_eq!(times.next_after(-1), Some(GRAIN_MS), "the earliest is kept");
    }
}
