//! The pure retry rules: retry policies, their schedules, which failures may be
//! retried, and the decision after a failed attempt. No clock and no randomness here: the
//! caller passes the message's age and a jitter unit, so whole schedules test in microseconds.

mod decision;
mod json;
#[cfg(feature = "openapi")]
mod openapi;

use serde::{Deserialize, Serialize};

use crate::states::{UnknownText, text_enum};

pub use decision::{DeadReason, Failure, Next};

text_enum!(
    /// The named schedules (the presets the README lists).
    Preset { Workfront = "workfront", EventGrid = "event-grid", Eventarc = "eventarc" }
);

/// Which failures may be retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryOn {
    All,
    Transient,
    /// Sorted and without duplicates once parsed.
    Codes(Vec<u16>),
}

/// How long to wait between attempts.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    Preset(Preset),
    Exponential {
        min_delay_secs: u32,
        max_delay_secs: u32,
    },
    /// JSON kind `"schedule"`: explicit delays, the last one repeating.
    Fixed {
        delays_secs: Vec<u32>,
        jitter: f64,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    pub schedule: Schedule,
    /// Attempts in total, the first one included.
    pub max_attempts: u32,
    pub ttl_secs: u32,
    pub retry_on: RetryOn,
}

/// Workfront: the delay after failed attempt n is 2^(n−1) × 84.8 s.
const WORKFRONT_UNIT_MS: u64 = 84_800;
/// Event Grid: these delays, then the last one forever.
const EVENT_GRID_DELAYS_SECS: [u32; 7] = [10, 30, 60, 300, 600, 1800, 3600];
const EVENT_GRID_JITTER: f64 = 0.10;
/// Eventarc: 1 s doubling, capped at 60 s.
const EVENTARC_CAP_MS: u64 = 60_000;

impl RetryPolicy {
    /// The preset's numbers, as the README's retry policies state them.
    pub fn preset(p: Preset) -> Self {
        let (max_attempts, ttl_secs, retry_on) = match p {
            Preset::Workfront => (12, 180_000, RetryOn::All),
            Preset::EventGrid => (30, 86_400, RetryOn::All),
            Preset::Eventarc => (5, 86_400, RetryOn::Transient),
        };
        Self { schedule: Schedule::Preset(p), max_attempts, ttl_secs, retry_on }
    }

    pub fn default_policy() -> Self {
        Self::preset(Preset::EventGrid)
    }

    /// Milliseconds to wait after failed attempt `failed_attempt` (1-based; 0 counts as 1)
    /// before the next one, before jitter. Saturates rather than overflowing for large n.
    pub fn base_delay_ms(&self, failed_attempt: u32) -> u64 {
        let n = failed_attempt.max(1);
        match &self.schedule {
            Schedule::Preset(Preset::Workfront) => doubled(WORKFRONT_UNIT_MS, n),
            Schedule::Preset(Preset::EventGrid) => secs_ms(repeat_last(&EVENT_GRID_DELAYS_SECS, n)),
            Schedule::Preset(Preset::Eventarc) => doubled(1_000, n).min(EVENTARC_CAP_MS),
            Schedule::Exponential { min_delay_secs, max_delay_secs } => {
                doubled(secs_ms(*min_delay_secs), n).min(secs_ms(*max_delay_secs))
            }
            Schedule::Fixed { delays_secs, .. } => secs_ms(repeat_last(delays_secs, n)),
        }
    }

    /// The fraction by which each delay may randomly vary.
    pub fn jitter_fraction(&self) -> f64 {
        match &self.schedule {
            Schedule::Preset(Preset::EventGrid) => EVENT_GRID_JITTER,
            Schedule::Fixed { jitter, .. } => *jitter,
            _ => 0.0,
        }
    }

    /// The delays before retries 1 to `retries`, summed, without jitter: retry `retries` is due
    /// this long after the first failure (0 for none).
    pub fn offset_ms(&self, retries: u32) -> u64 {
        (1..=retries).fold(0u64, |sum, n| sum.saturating_add(self.base_delay_ms(n)))
    }

    /// `(attempt_number, offset_ms)` of every attempt if all failed instantly, without jitter,
    /// stopping at `max_attempts` and before any attempt later than the TTL. Starts with `(1, 0)`.
    pub fn preview(&self) -> Vec<(u32, u64)> {
        let mut out = vec![(1, 0)];
        let mut offset: u64 = 0;
        for attempt in 2..=self.max_attempts {
            offset = offset.saturating_add(self.base_delay_ms(attempt - 1));
            if offset > self.ttl_ms() {
                break;
            }
            out.push((attempt, offset));
        }
        out
    }

    fn ttl_ms(&self) -> u64 {
        secs_ms(self.ttl_secs)
    }
}

fn secs_ms(secs: u32) -> u64 {
    u64::from(secs) * 1_000
}

/// `unit × 2^(n−1)`, saturating.
fn doubled(unit: u64, n: u32) -> u64 {
    let factor = 1u64.checked_shl(n - 1).unwrap_or(u64::MAX);
    unit.saturating_mul(factor)
}

/// The delay after failed attempt n from a list whose last entry repeats (0 if empty).
fn repeat_last(delays: &[u32], n: u32) -> u32 {
    let i = (n as usize - 1).min(delays.len().saturating_sub(1));
    delays.get(i).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(super) const S: u64 = 1_000;

    pub(super) fn custom(schedule: Schedule, max_attempts: u32, ttl_secs: u32, retry_on: RetryOn) -> RetryPolicy {
        RetryPolicy { schedule, max_attempts, ttl_secs, retry_on }
    }

    fn offsets_secs_x10(policy: &RetryPolicy) -> Vec<u64> {
        // Tenths of a second, so workfront's 84.8 s steps compare exactly.
        policy.preview().iter().map(|&(_, ms)| ms / 100).collect()
    }

    #[test]
    fn presets_are_spoken_as_text() {
        for &preset in Preset::ALL {
            assert_eq!(Preset::parse(preset.as_str()), Some(preset));
            assert_eq!(serde_json::to_string(&preset).unwrap(), format!("\"{preset}\""));
        }
        assert_eq!(Preset::EventGrid.as_str(), "event-grid");
        assert_eq!(Preset::parse("EventGrid"), None);
    }

    #[test]
    fn workfront_preview_is_doubling_84_8_seconds() {
        let p = RetryPolicy::preset(Preset::Workfront);
        assert_eq!(
            offsets_secs_x10(&p),
            vec![0, 848, 2544, 5936, 12720, 26288, 53424, 107696, 216240, 433328, 867504, 1735856]
        );
        let preview = p.preview();
        assert_eq!(preview.last(), Some(&(12, 2047 * 84_800)));
        assert_eq!((p.max_attempts, p.ttl_secs, &p.retry_on), (12, 180_000, &RetryOn::All));
        assert_eq!(p.jitter_fraction(), 0.0);
    }

    #[test]
    fn event_grid_preview_matches_spec() {
        let p = RetryPolicy::default_policy();
        assert_eq!(p, RetryPolicy::preset(Preset::EventGrid));
        let preview = p.preview();
        let first: Vec<u64> = preview.iter().take(10).map(|&(_, ms)| ms).collect();
        let want = [0, 10, 40, 100, 400, 1000, 2800, 6400, 10_000, 13_600];
        assert_eq!(first, want.map(|s| s * S).to_vec());
        assert_eq!(preview.len(), 30);
        assert_eq!(preview.last(), Some(&(30, 85_600 * S)));
        assert!(preview.last().unwrap().1 <= 86_400 * S);
        assert_eq!(p.base_delay_ms(100), 3_600 * S, "then every hour");
        assert_eq!(p.jitter_fraction(), 0.10);
        assert_eq!((p.max_attempts, p.ttl_secs, &p.retry_on), (30, 86_400, &RetryOn::All));
    }

    #[test]
    fn eventarc_preview_doubles_from_one_second_capped_at_sixty() {
        let p = RetryPolicy::preset(Preset::Eventarc);
        assert_eq!(p.preview(), vec![(1, 0), (2, S), (3, 3 * S), (4, 7 * S), (5, 15 * S)]);
        assert_eq!(p.base_delay_ms(6), 32 * S);
        assert_eq!(p.base_delay_ms(7), 60 * S);
        assert_eq!(p.base_delay_ms(1_000), 60 * S);
        assert_eq!((p.max_attempts, p.ttl_secs, &p.retry_on), (5, 86_400, &RetryOn::Transient));
    }

    #[test]
    fn exponential_is_linear_when_min_equals_max() {
        let exp = Schedule::Exponential { min_delay_secs: 30, max_delay_secs: 30 };
        let p = custom(exp, 5, 3_600, RetryOn::All);
        let want = vec![(1, 0), (2, 30 * S), (3, 60 * S), (4, 90 * S), (5, 120 * S)];
        assert_eq!(p.preview(), want);
    }

    #[test]
    fn exponential_doubles_then_caps_and_saturates() {
        let exp = Schedule::Exponential { min_delay_secs: 2, max_delay_secs: 10 };
        let p = custom(exp, 100, 604_800, RetryOn::All);
        let delays: Vec<u64> = (1..=6).map(|n| p.base_delay_ms(n)).collect();
        assert_eq!(delays, [2, 4, 8, 10, 10, 10].map(|s| s * S).to_vec());
        assert_eq!(p.base_delay_ms(u32::MAX), 10 * S);
        let wf = RetryPolicy::preset(Preset::Workfront);
        assert_eq!(wf.base_delay_ms(100), u64::MAX);
        assert_eq!(wf.base_delay_ms(0), wf.base_delay_ms(1));
    }

    #[test]
    fn fixed_schedule_repeats_its_last_delay_and_stops_at_ttl() {
        let fixed = Schedule::Fixed { delays_secs: vec![5, 60], jitter: 0.2 };
        let p = custom(fixed, 10, 150, RetryOn::All);
        assert_eq!(p.preview(), vec![(1, 0), (2, 5 * S), (3, 65 * S), (4, 125 * S)]);
        assert_eq!(p.jitter_fraction(), 0.2);
    }

    #[test]
    fn preview_keeps_an_attempt_exactly_at_the_ttl() {
        let fixed = Schedule::Fixed { delays_secs: vec![50], jitter: 0.0 };
        let p = custom(fixed, 10, 100, RetryOn::All);
        assert_eq!(p.preview(), vec![(1, 0), (2, 50 * S), (3, 100 * S)]);
    }

    // --- strategies, shared with the other modules' tests ------------------------------

    fn retry_on_strategy() -> impl Strategy<Value = RetryOn> {
        prop_oneof![
            Just(RetryOn::All),
            Just(RetryOn::Transient),
            prop::collection::btree_set(100u16..=599, 1..=50)
                .prop_map(|codes| RetryOn::Codes(codes.into_iter().collect())),
        ]
    }

    fn exponential_strategy() -> impl Strategy<Value = RetryPolicy> {
        (1u32..=600, 1u32..=600, 1u32..=100, 1u32..=604_800, retry_on_strategy()).prop_map(
            |(a, b, max_attempts, ttl_secs, retry_on)| {
                let schedule = Schedule::Exponential { min_delay_secs: a.min(b), max_delay_secs: a.max(b) };
                custom(schedule, max_attempts, ttl_secs, retry_on)
            },
        )
    }

    fn fixed_strategy() -> impl Strategy<Value = RetryPolicy> {
        let delays = prop::collection::vec(1u32..=604_800, 1..=100);
        (delays, 0.0..=0.5f64, 1u32..=100, 1u32..=604_800, retry_on_strategy()).prop_map(
            |(delays_secs, jitter, max_attempts, ttl_secs, retry_on)| {
                custom(Schedule::Fixed { delays_secs, jitter }, max_attempts, ttl_secs, retry_on)
            },
        )
    }

    /// Custom policies within the accepted ranges.
    pub(super) fn policy_strategy() -> impl Strategy<Value = RetryPolicy> {
        prop_oneof![exponential_strategy(), fixed_strategy()]
    }

    proptest! {
        #[test]
        fn preview_respects_max_attempts_and_ttl(p in policy_strategy()) {
            let preview = p.preview();
            prop_assert!(preview.len() <= p.max_attempts as usize);
            prop_assert_eq!(preview[0], (1, 0));
            for (i, &(attempt, offset)) in preview.iter().enumerate() {
                prop_assert_eq!(attempt as usize, i + 1);
                prop_assert!(offset <= u64::from(p.ttl_secs) * 1_000);
            }
        }

        #[test]
        fn exponential_delays_never_shrink(p in exponential_strategy()) {
            for n in 1..150 {
                prop_assert!(p.base_delay_ms(n) <= p.base_delay_ms(n + 1));
            }
        }
    }
}
