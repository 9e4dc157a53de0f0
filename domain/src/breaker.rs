//! The circuit breaker of one endpoint: one customer's target URL.
//!
//! A failing endpoint should not consume attempts or worker time. After enough failures its circuit
//! is `disabled`: only one real message every `probe_ms` goes out as a probe, the others wait without
//! spending attempts. After a long failure streak with no recent success it is `locked`: nothing is
//! sent until an admin unlocks it. This module holds only the rules; the caller loads the stored row,
//! passes the time in (unix milliseconds) and writes the result back.

use crate::states::EndpointState;

/// The thresholds, from the `breaker.*` settings, in milliseconds where they are times.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerConfig {
    pub failure_rate: f64,
    pub min_attempts: u64,
    pub window_ms: i64,
    pub disable_consecutive: u64,
    pub lock_consecutive: u64,
    pub lock_silence_ms: i64,
    pub lock_consecutive_any: u64,
    pub probe_ms: i64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            failure_rate: 0.70,
            min_attempts: 100,
            window_ms: 86_400_000,
            disable_consecutive: 2000,
            lock_consecutive: 2000,
            lock_silence_ms: 259_200_000,
            lock_consecutive_any: 50_000,
            probe_ms: 600_000,
        }
    }
}

/// Most buckets a window keeps, so the stored column stays small whatever the traffic.
const MAX_BUCKETS: usize = 60;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bucket {
    start: i64,
    attempts: u64,
    failures: u64,
}

/// Attempt counts in a sliding window, kept as up to 60 time buckets of width window_ms / 60 (at least 1 ms).
/// Buckets older than the window are dropped whenever it is written and ignored whenever it is read.
/// Serialized compactly for storage in one text column: `to_json()` gives e.g.
/// `[[1700000000000,3,1],[1700000060000,5,5]]` (bucket start ms, attempts, failures); `from_json(text)`
/// accepts that and returns an empty window for anything unparsable (never panics).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Window {
    /// Oldest first, distinct starts.
    buckets: Vec<Bucket>,
}

impl Window {
    pub fn from_json(text: &str) -> Window {
        let rows: Vec<(i64, u64, u64)> = serde_json::from_str(text).unwrap_or_default();
        let mut window = Window::default();
        for (start, attempts, failures) in rows {
            window.add(Bucket { start, attempts, failures: failures.min(attempts) });
        }
        window
    }

    pub fn to_json(&self) -> String {
        let rows: Vec<(i64, u64, u64)> = self.buckets.iter().map(|b| (b.start, b.attempts, b.failures)).collect();
        serde_json::to_string(&rows).unwrap_or_else(|_| "[]".to_string())
    }

    pub fn record(&mut self, now_ms: i64, failed: bool, window_ms: i64) {
        self.buckets.retain(|b| b.start > window_floor(now_ms, window_ms));
        let width = bucket_width(window_ms);
        let start = now_ms.saturating_sub(now_ms.rem_euclid(width));
        self.add(Bucket { start, attempts: 1, failures: u64::from(failed) });
    }

    /// (attempts, failures) of the buckets whose start is within (now_ms - window_ms, now_ms].
    pub fn totals(&self, now_ms: i64, window_ms: i64) -> (u64, u64) {
        let floor = window_floor(now_ms, window_ms);
        self.buckets
            .iter()
            .filter(|b| b.start > floor && b.start <= now_ms)
            .fold((0, 0), |(a, f), b| (a.saturating_add(b.attempts), f.saturating_add(b.failures)))
    }

    /// Merges into the bucket with the same start or inserts in order (clocks of several workers may
    /// disagree a little), then keeps only the newest buckets.
    fn add(&mut self, bucket: Bucket) {
        if bucket.attempts == 0 {
            return;
        }
        match self.buckets.binary_search_by_key(&bucket.start, |b| b.start) {
            Ok(i) => {
                let b = &mut self.buckets[i];
                b.attempts = b.attempts.saturating_add(bucket.attempts);
                b.failures = b.failures.saturating_add(bucket.failures);
            }
            Err(i) => self.buckets.insert(i, bucket),
        }
        if self.buckets.len() > MAX_BUCKETS {
            self.buckets.drain(..self.buckets.len() - MAX_BUCKETS);
        }
    }
}

/// Rounded up, so the buckets of one window never number more than 60.
fn bucket_width(window_ms: i64) -> i64 {
    let window_ms = window_ms.max(1);
    (window_ms / 60 + i64::from(window_ms % 60 != 0)).max(1)
}

/// Buckets starting at or before this are outside the window.
fn window_floor(now_ms: i64, window_ms: i64) -> i64 {
    now_ms.saturating_sub(window_ms.max(1))
}

/// One endpoint's circuit (mirrors the stored row).
#[derive(Debug, Clone, PartialEq)]
pub struct Circuit {
    pub state: EndpointState,
    pub consecutive_failures: u64,
    pub window: Window,
    pub last_success_at: Option<i64>,
    pub last_failure_at: Option<i64>,
    /// When a disabled circuit may send its next probe.
    pub next_probe_at: Option<i64>,
}

/// What the worker may do with a due message of this endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Send,
    /// Disabled and a probe is due: send this one message as the probe.
    Probe,
    /// Disabled and no probe due: put the message back until then, spending no attempt.
    Defer {
        until_ms: i64,
    },
    /// Locked: the message becomes `held`; nothing is sent.
    Hold,
}

impl Gate {
    /// The gate of a circuit in `state` whose next probe is due at `next_probe_at`:
    /// it needs neither the counts nor the window.
    pub fn of(state: EndpointState, next_probe_at: Option<i64>, now_ms: i64) -> Gate {
        match state {
            EndpointState::Closed => Gate::Send,
            EndpointState::Locked => Gate::Hold,
            EndpointState::Disabled => match next_probe_at {
                Some(until_ms) if until_ms > now_ms => Gate::Defer { until_ms },
                _ => Gate::Probe,
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub from: EndpointState,
    pub to: EndpointState,
}

impl Transition {
    pub fn changed(&self) -> bool {
        self.from != self.to
    }
}

impl Circuit {
    /// A new endpoint.
    pub fn closed() -> Circuit {
        Circuit {
            state: EndpointState::Closed,
            consecutive_failures: 0,
            window: Window::default(),
            last_success_at: None,
            last_failure_at: None,
            next_probe_at: None,
        }
    }

    pub fn gate(&self, now_ms: i64) -> Gate {
        Gate::of(self.state, self.next_probe_at, now_ms)
    }

    /// Reserves the probe: when the gate is Probe, moves next_probe_at to now + probe_ms (so concurrent
    /// workers see Defer) and returns true; otherwise false and nothing changes.
    pub fn take_probe(&mut self, now_ms: i64, cfg: &BreakerConfig) -> bool {
        if self.gate(now_ms) != Gate::Probe {
            return false;
        }
        self.next_probe_at = Some(now_ms.saturating_add(cfg.probe_ms));
        true
    }

    /// Counts one finished attempt and applies the rules; returns the transition (from == to when none).
    pub fn record(&mut self, success: bool, now_ms: i64, cfg: &BreakerConfig) -> Transition {
        use EndpointState::{Closed, Disabled, Locked};
        let from = self.state;
        self.count(success, now_ms, cfg);
        let to = match (from, success) {
            // Only an admin unlocks, even if an attempt in flight at lock time succeeded.
            (Locked, _) => Locked,
            (Closed, true) => Closed,
            (Disabled, true) => {
                self.reset();
                Closed
            }
            (_, false) if self.lock_due(now_ms, cfg) => {
                self.next_probe_at = None;
                Locked
            }
            (Closed, false) if !self.disable_due(now_ms, cfg) => Closed,
            // Newly disabled, or a failed probe: the next probe waits a full period.
            (Closed | Disabled, false) => {
                self.next_probe_at = Some(now_ms.saturating_add(cfg.probe_ms));
                Disabled
            }
        };
        self.state = to;
        Transition { from, to }
    }

    /// The admin's unlock: closed, counters and window reset, no probe pending.
    pub fn unlock(&mut self) {
        self.reset();
        self.state = EndpointState::Closed;
    }

    fn count(&mut self, success: bool, now_ms: i64, cfg: &BreakerConfig) {
        self.window.record(now_ms, !success, cfg.window_ms);
        if success {
            self.last_success_at = Some(now_ms);
            self.consecutive_failures = 0;
        } else {
            self.last_failure_at = Some(now_ms);
            self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        }
    }

    /// Counters start over; the last success/failure times are history and stay.
    fn reset(&mut self) {
        self.consecutive_failures = 0;
        self.window = Window::default();
        self.next_probe_at = None;
    }

    fn lock_due(&self, now_ms: i64, cfg: &BreakerConfig) -> bool {
        let silent = match self.last_success_at {
            None => true,
            Some(at) => now_ms.saturating_sub(at) > cfg.lock_silence_ms,
        };
        let streak = self.consecutive_failures;
        (streak > cfg.lock_consecutive && silent) || streak >= cfg.lock_consecutive_any
    }

    fn disable_due(&self, now_ms: i64, cfg: &BreakerConfig) -> bool {
        self.failure_rate_high(now_ms, cfg) || self.consecutive_failures >= cfg.disable_consecutive
    }

    /// Whether the window holds more than `min_attempts` attempts and too many of them failed.
    pub fn failure_rate_high(&self, now_ms: i64, cfg: &BreakerConfig) -> bool {
        let (attempts, failures) = self.window.totals(now_ms, cfg.window_ms);
        // attempts > min_attempts >= 0, so the division is safe.
        attempts > cfg.min_attempts && failures as f64 / attempts as f64 > cfg.failure_rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use EndpointState::{Closed, Disabled, Locked};
    use proptest::prelude::*;

    const T0: i64 = 1_700_000_000_000;
    const SEC: i64 = 1_000;
    const HOUR: i64 = 3_600 * SEC;
    const DAY: i64 = 24 * HOUR;

    /// Records `n` outcomes one second apart after `*now`; returns the last transition.
    fn run(c: &mut Circuit, success: bool, n: u64, now: &mut i64, cfg: &BreakerConfig) -> Transition {
        let mut last = Transition { from: c.state, to: c.state };
        for _ in 0..n {
            *now += SEC;
            last = c.record(success, *now, cfg);
        }
        last
    }

    /// Records blocks of `ok` successes then `bad` failures; the state after the whole sequence.
    fn blocks(ok: u64, bad: u64, times: u64) -> (Circuit, i64) {
        let cfg = BreakerConfig::default();
        let (mut c, mut now) = (Circuit::closed(), T0);
        for _ in 0..times {
            run(&mut c, true, ok, &mut now, &cfg);
            run(&mut c, false, bad, &mut now, &cfg);
        }
        (c, now)
    }

    /// Disabled by 2000 consecutive failures after plenty of successes (so the rate rule stays quiet).
    fn disabled_by_streak() -> (Circuit, i64) {
        let cfg = BreakerConfig::default();
        let (mut c, mut now) = (Circuit::closed(), T0);
        run(&mut c, true, 10_000, &mut now, &cfg);
        run(&mut c, false, 2000, &mut now, &cfg);
        assert_eq!(c.state, Disabled);
        (c, now)
    }

    #[test]
    fn disables_only_above_100_attempts_and_above_70_percent() {
        let cfg = BreakerConfig::default();
        // 3 ok then 7 failed, ten times: exactly 70 % of exactly 100 attempts.
        let (mut c, mut now) = blocks(3, 7, 10);
        assert_eq!((c.state, c.window.totals(now, cfg.window_ms)), (Closed, (100, 70)));
        // The 101st attempt fails: 71/101 = 0.703.
        let t = run(&mut c, false, 1, &mut now, &cfg);
        assert_eq!(t, Transition { from: Closed, to: Disabled });
        assert_eq!(c.next_probe_at, Some(now + 600 * SEC));

        // 100 attempts at 90 %: not more than 100 attempts; the 101st failure disables.
        let (mut c, mut now) = blocks(10, 90, 1);
        assert_eq!(c.state, Closed);
        assert_eq!(run(&mut c, false, 1, &mut now, &cfg).to, Disabled);

        // 101 attempts at 70/101 = 69.3 %.
        assert_eq!(blocks(31, 70, 1).0.state, Closed);
        // 110 attempts at exactly 77/110 = 70 %; one more failure tips it over.
        let (mut c, mut now) = blocks(33, 77, 1);
        assert_eq!(c.state, Closed);
        assert_eq!(run(&mut c, false, 1, &mut now, &cfg).to, Disabled);
    }

    #[test]
    fn disables_at_2000_consecutive_failures() {
        let cfg = BreakerConfig::default();
        let (mut c, mut now) = (Circuit::closed(), T0);
        run(&mut c, true, 10_000, &mut now, &cfg);
        let t = run(&mut c, false, 1999, &mut now, &cfg);
        assert_eq!((t, c.consecutive_failures), (Transition { from: Closed, to: Closed }, 1999));
        let t = run(&mut c, false, 1, &mut now, &cfg);
        assert!(t.changed());
        assert_eq!((t.from, t.to), (Closed, Disabled));
        assert_eq!(c.next_probe_at, Some(now + 600_000));
        assert_eq!(c.last_failure_at, Some(now));
    }

    #[test]
    fn a_disabled_circuit_probes_once_per_period() {
        let cfg = BreakerConfig::default();
        let (mut c, now) = disabled_by_streak();
        let due = now + 600 * SEC;
        assert_eq!(c.gate(due - 1), Gate::Defer { until_ms: due });
        assert!(!c.take_probe(due - 1, &cfg));
        assert_eq!(c.gate(due), Gate::Probe);
        assert_eq!(c.gate(due + HOUR), Gate::Probe);

        assert!(c.take_probe(due, &cfg));
        assert_eq!(c.next_probe_at, Some(due + 600 * SEC));
        assert!(!c.take_probe(due, &cfg), "a second worker gets no probe");
        assert_eq!(c.gate(due), Gate::Defer { until_ms: due + 600 * SEC });

        // The probe fails 5 s later: the next one waits a full period from then.
        let t = c.record(false, due + 5 * SEC, &cfg);
        assert_eq!(t, Transition { from: Disabled, to: Disabled });
        assert!(!t.changed());
        assert_eq!(c.next_probe_at, Some(due + 605 * SEC));

        // The next probe succeeds: closed, counters reset.
        let later = due + 605 * SEC;
        assert!(c.take_probe(later, &cfg));
        let t = c.record(true, later + SEC, &cfg);
        assert_eq!(t, Transition { from: Disabled, to: Closed });
        assert_eq!((c.consecutive_failures, c.window.totals(later + SEC, cfg.window_ms)), (0, (0, 0)));
        assert_eq!((c.next_probe_at, c.last_success_at), (None, Some(later + SEC)));
        assert_eq!(c.gate(later + SEC), Gate::Send);
    }

    #[test]
    fn a_long_silence_locks_after_more_than_2000_failures() {
        let cfg = BreakerConfig::default();
        let (mut c, mut now) = (Circuit::closed(), T0);
        c.record(true, now, &cfg);
        now += 73 * HOUR;
        run(&mut c, false, 2000, &mut now, &cfg);
        assert_eq!(c.state, Disabled, "the rate rule disabled it at the 101st");
        let t = run(&mut c, false, 1, &mut now, &cfg);
        assert_eq!(t, Transition { from: Disabled, to: Locked });
        assert_eq!(c.next_probe_at, None);
    }

    #[test]
    fn a_recent_success_delays_the_lock_until_50000_failures() {
        let cfg = BreakerConfig::default();
        let (mut c, mut now) = (Circuit::closed(), T0);
        c.record(true, now, &cfg);
        now += HOUR;
        run(&mut c, false, 2001, &mut now, &cfg);
        assert_eq!(c.state, Disabled);
        run(&mut c, false, 49_999 - 2001, &mut now, &cfg);
        assert_eq!((c.state, c.consecutive_failures), (Disabled, 49_999));
        assert!(now - T0 < 72 * HOUR);
        assert_eq!(run(&mut c, false, 1, &mut now, &cfg).to, Locked);
    }

    #[test]
    fn never_a_success_locks_after_2001_failures() {
        let cfg = BreakerConfig::default();
        let (mut c, mut now) = (Circuit::closed(), T0);
        assert_eq!(run(&mut c, false, 2000, &mut now, &cfg).to, Disabled);
        assert_eq!(run(&mut c, false, 1, &mut now, &cfg).to, Locked);
    }

    #[test]
    fn locked_holds_until_an_admin_unlocks() {
        let cfg = BreakerConfig::default();
        let (mut c, mut now) = (Circuit::closed(), T0);
        run(&mut c, false, 2001, &mut now, &cfg);
        assert_eq!(c.state, Locked);
        for t in [0, now, now + 600 * SEC, now + 365 * DAY] {
            assert_eq!(c.gate(t), Gate::Hold);
        }
        assert!(!c.take_probe(now + 365 * DAY, &cfg));

        // An attempt in flight at lock time succeeds: counted, but still locked.
        let t = c.record(true, now + SEC, &cfg);
        assert_eq!(t, Transition { from: Locked, to: Locked });
        assert_eq!((c.consecutive_failures, c.last_success_at), (0, Some(now + SEC)));
        assert_eq!(c.record(false, now + 2 * SEC, &cfg).to, Locked);
        assert_eq!(c.consecutive_failures, 1);

        c.unlock();
        assert_eq!((c.state, c.consecutive_failures, c.next_probe_at), (Closed, 0, None));
        assert_eq!(c.window, Window::default());
        assert_eq!(c.gate(now), Gate::Send);
    }

    #[test]
    fn old_buckets_leave_the_window() {
        let cfg = BreakerConfig::default();
        let mut window = Window::default();
        for i in 0..500 {
            window.record(T0 - 25 * HOUR + i, true, DAY);
        }
        assert_eq!(window.totals(T0 - 25 * HOUR + 500, DAY), (500, 500));
        assert_eq!(window.totals(T0, DAY), (0, 0));

        // A failure now, after a burst 25 h ago, is one failure in one attempt.
        let mut c = Circuit { window, ..Circuit::closed() };
        assert_eq!(c.record(false, T0, &cfg).to, Closed);
        assert_eq!(c.window.totals(T0, DAY), (1, 1));
        assert_eq!(c.window.buckets.len(), 1, "the old bucket was dropped");
    }

    #[test]
    fn window_round_trips_through_json() {
        let text = "[[1700000000000,3,1],[1700000060000,5,5]]";
        let window = Window::from_json(text);
        assert_eq!(window.to_json(), text);
        assert_eq!(window.totals(1_700_000_060_000, DAY), (8, 6));

        let mut window = Window::default();
        for i in 0..200 {
            window.record(T0 + i * 10 * 60 * SEC, i % 3 == 0, DAY);
        }
        assert_eq!(Window::from_json(&window.to_json()), window);
        assert_eq!(Window::default().to_json(), "[]");
    }

    #[test]
    fn garbage_json_is_an_empty_window() {
        for text in ["", "x", "[[1]]", "{}", "null", "[[1,2]]", "[[1,2,3,4]]", "[[1,-2,0]]", "[[1.5,2,1]]", "[1,2,3]"] {
            assert_eq!(Window::from_json(text), Window::default(), "{text:?}");
        }
        // Repaired rather than trusted: failures capped at attempts, empty buckets dropped, order restored.
        let window = Window::from_json("[[20,1,3],[10,0,0],[5,2,2]]");
        assert_eq!(window.to_json(), "[[5,2,2],[20,1,1]]");
        let many: Vec<String> = (0..100).map(|i| format!("[{i},1,0]")).collect();
        let window = Window::from_json(&format!("[{}]", many.join(",")));
        assert_eq!(window.buckets.len(), 60);
        assert_eq!(window.buckets[0].start, 40, "the newest are kept");
    }

    #[test]
    fn a_window_never_holds_more_than_60_buckets() {
        for window_ms in [1, 7, 59, 60, 61, 100, 119, 3_600_000, DAY] {
            let mut window = Window::default();
            let step = (window_ms / 97).max(1);
            for i in 0..1_000 {
                window.record(T0 + i * step, i % 2 == 0, window_ms);
                assert!(window.buckets.len() <= MAX_BUCKETS, "window {window_ms}");
            }
        }
    }

    #[test]
    fn small_thresholds_of_the_acceptance_test() {
        let cfg = BreakerConfig {
            disable_consecutive: 5,
            probe_ms: 2 * SEC,
            lock_consecutive: 9,
            lock_silence_ms: 0,
            ..BreakerConfig::default()
        };
        let (mut c, mut now) = (Circuit::closed(), T0);
        c.record(true, now, &cfg);
        for n in 1..=4 {
            assert_eq!(run(&mut c, false, 1, &mut now, &cfg).to, Closed, "failure {n}");
        }
        assert_eq!(run(&mut c, false, 1, &mut now, &cfg), Transition { from: Closed, to: Disabled });
        for n in 6..=10 {
            assert_eq!(c.gate(now + 2 * SEC - 1), Gate::Defer { until_ms: now + 2 * SEC });
            now += 2 * SEC;
            assert!(c.take_probe(now, &cfg));
            let expected = if n < 10 { Disabled } else { Locked };
            assert_eq!(c.record(false, now, &cfg).to, expected, "failure {n}");
        }
        assert_eq!((c.consecutive_failures, c.next_probe_at), (10, None));
    }

    fn config_strategy() -> impl Strategy<Value = BreakerConfig> {
        (0.0..1.0f64, 0u64..20, 1i64..50_000_000, 1u64..30, 0u64..40, 0i64..100_000_000, 1u64..60, 0i64..10_000_000)
            .prop_map(|(failure_rate, min_attempts, window_ms, dc, lc, lock_silence_ms, lca, probe_ms)| BreakerConfig {
                failure_rate,
                min_attempts,
                window_ms,
                disable_consecutive: dc,
                lock_consecutive: lc,
                lock_silence_ms,
                lock_consecutive_any: lca,
                probe_ms,
            })
    }

    #[derive(Debug, Clone)]
    enum Op {
        Record { success: bool, dt_ms: i64 },
        TakeProbe { dt_ms: i64 },
        Unlock,
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        prop_oneof![
            12 => (any::<bool>(), 0i64..10_000_000).prop_map(|(success, dt_ms)| Op::Record { success, dt_ms }),
            3 => (0i64..10_000_000).prop_map(|dt_ms| Op::TakeProbe { dt_ms }),
            1 => Just(Op::Unlock),
        ]
    }

    proptest! {
        #[test]
        fn the_rules_hold_for_any_sequence(cfg in config_strategy(), ops in prop::collection::vec(op_strategy(), 0..300)) {
            let (mut c, mut now) = (Circuit::closed(), T0);
            let (mut streak, mut recorded) = (0u64, 0u64);
            for op in ops {
                let before = c.state;
                match op {
                    Op::Unlock => {
                        c.unlock();
                        (streak, recorded) = (0, 0);
                    }
                    Op::TakeProbe { dt_ms } => {
                        now += dt_ms;
                        let was = c.gate(now);
                        prop_assert_eq!(c.take_probe(now, &cfg), was == Gate::Probe);
                    }
                    Op::Record { success, dt_ms } => {
                        now += dt_ms;
                        let t = c.record(success, now, &cfg);
                        prop_assert_eq!((t.from, t.to), (before, c.state));
                        streak = if success { 0 } else { streak + 1 };
                        recorded += 1;
                        if before == Locked {
                            prop_assert_eq!(c.state, Locked, "locked is absorbing");
                        }
                        if before != Locked && c.state == Locked {
                            let silent = c.last_success_at.is_none_or(|at| now - at > cfg.lock_silence_ms);
                            prop_assert!(
                                (streak > cfg.lock_consecutive && silent) || streak >= cfg.lock_consecutive_any
                            );
                        }
                        if (before, c.state) == (Closed, Disabled) {
                            let (attempts, failures) = c.window.totals(now, cfg.window_ms);
                            let rate = attempts > cfg.min_attempts
                                && failures as f64 / attempts as f64 > cfg.failure_rate;
                            prop_assert!(!success && (rate || streak >= cfg.disable_consecutive));
                        }
                        if (before, c.state) == (Disabled, Closed) {
                            prop_assert!(success);
                            recorded = 0;
                        }
                    }
                }
                prop_assert_eq!(c.consecutive_failures, streak);
                let (attempts, failures) = c.window.totals(now, cfg.window_ms);
                prop_assert!(failures <= attempts && attempts <= recorded);
                prop_assert!(c.window.buckets.len() <= MAX_BUCKETS);
                prop_assert!(c.gate(now) != Gate::Send || c.state == Closed);
                prop_assert!(c.state == Disabled || c.next_probe_at.is_none());
            }
        }
    }
}
