//! What follows a failed attempt: which failures a policy retries, when, and why a message ends dead.

use serde::{Deserialize, Serialize};

use super::{RetryOn, RetryPolicy};
use crate::states::{UnknownText, text_enum};

/// What went wrong in one attempt (the worker builds this).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Status(u16),
    Timeout,
    Connect,
    Dns,
    Tls,
    BlockedTarget,
    BodyTooLarge,
    /// The receiver's credentials could not be had (its token endpoint failed).
    Auth,
    Other,
}

text_enum!(
    /// Why a message is `dead` (stored as text).
    DeadReason {
        NonRetryable = "non_retryable",
        AttemptsExhausted = "attempts_exhausted",
        Expired = "expired",
        SubscriptionDeleted = "subscription_deleted",
    }
);

/// The decision after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    RetryInMs(u64),
    Dead(DeadReason),
}

/// Statuses that `transient` retries; everything else with a status is permanent.
pub(super) const TRANSIENT_STATUSES: [u16; 7] = [408, 409, 429, 500, 502, 503, 504];

impl RetryPolicy {
    /// Whether this failure may be retried under `retry_on`.
    pub fn is_retryable(&self, failure: Failure) -> bool {
        match failure {
            // Retrying cannot make a refused address acceptable.
            Failure::BlockedTarget => false,
            Failure::Status(code) => match &self.retry_on {
                RetryOn::All => true,
                RetryOn::Transient => TRANSIENT_STATUSES.contains(&code),
                RetryOn::Codes(codes) => codes.contains(&code),
            },
            // An oversized answer will be oversized again; only `all` retries it.
            Failure::BodyTooLarge => self.retry_on == RetryOn::All,
            // Timeouts and connection-level errors stay retryable under every `retry_on`.
            Failure::Timeout | Failure::Connect | Failure::Dns | Failure::Tls | Failure::Auth | Failure::Other => true,
        }
    }

    /// Expired when the age is strictly greater than `ttl_secs`.
    pub fn is_expired(&self, age_ms: u64) -> bool {
        age_ms > self.ttl_ms()
    }

    /// The decision after a failed attempt; `attempts_made` includes the one that just failed,
    /// `age_ms` is the message's age now, `jitter_unit` a number in [-1, 1] from the caller.
    ///
    /// Retry n is due at the series' first failure plus the delays of retries 1 to n (the last
    /// one jittered): `since_first_failure_ms` is the time since then (0 when this attempt is the
    /// first failure), so slow attempts do not push the schedule later, and a retry whose time
    /// has passed is due at once. `None` (a series from before first failures were recorded)
    /// waits the delay from now. A `Retry-After` on a 429 or 503 can only lengthen the wait, and
    /// never past the TTL; the policy's own time past the TTL ends the message.
    pub fn after_failure(
        &self,
        failure: Failure,
        attempts_made: u32,
        age_ms: u64,
        since_first_failure_ms: Option<u64>,
        retry_after_ms: Option<u64>,
        jitter_unit: f64,
    ) -> Next {
        if !self.is_retryable(failure) {
            return Next::Dead(DeadReason::NonRetryable);
        }
        if attempts_made >= self.max_attempts {
            return Next::Dead(DeadReason::AttemptsExhausted);
        }
        if self.is_expired(age_ms) {
            return Next::Dead(DeadReason::Expired);
        }
        let remaining_ms = self.ttl_ms() - age_ms;
        let step = jittered(self.base_delay_ms(attempts_made), self.jitter_fraction(), jitter_unit);
        let wait = match since_first_failure_ms {
            Some(since) => self.offset_ms(attempts_made - 1).saturating_add(step).saturating_sub(since),
            None => step,
        };
        if let (Some(asked), Failure::Status(429 | 503)) = (retry_after_ms, failure) {
            return Next::RetryInMs(wait.max(asked).min(remaining_ms));
        }
        if wait > remaining_ms { Next::Dead(DeadReason::Expired) } else { Next::RetryInMs(wait) }
    }
}

/// `base × (1 + fraction × unit)`, rounded; a unit outside [-1, 1] (or NaN) is clamped.
fn jittered(base: u64, fraction: f64, unit: f64) -> u64 {
    let unit = if unit.is_nan() { 0.0 } else { unit.clamp(-1.0, 1.0) };
    // Float-to-int `as` saturates, so huge bases stay huge instead of wrapping.
    (base as f64 * (1.0 + fraction * unit)).round() as u64
}

#[cfg(test)]
mod tests {
    use super::super::tests::{S, custom, policy_strategy};
    use super::super::{Preset, Schedule, WORKFRONT_UNIT_MS};
    use super::*;
    use proptest::prelude::*;

    fn with_retry_on(retry_on: RetryOn) -> RetryPolicy {
        RetryPolicy { retry_on, ..RetryPolicy::default_policy() }
    }

    #[test]
    fn classification_table() {
        use Failure::*;
        let all = with_retry_on(RetryOn::All);
        let transient = with_retry_on(RetryOn::Transient);
        let codes = with_retry_on(RetryOn::Codes(vec![409, 503]));
        let table: &[(&RetryPolicy, Failure, bool)] = &[
            (&all, Status(500), true),
            (&all, Status(400), true),
            (&all, Status(404), true),
            (&all, Status(301), true),
            (&all, Timeout, true),
            (&all, Connect, true),
            (&all, Dns, true),
            (&all, Tls, true),
            (&all, Other, true),
            (&all, BodyTooLarge, true),
            (&all, BlockedTarget, false),
            (&transient, Status(408), true),
            (&transient, Status(409), true),
            (&transient, Status(429), true),
            (&transient, Status(500), true),
            (&transient, Status(502), true),
            (&transient, Status(503), true),
            (&transient, Status(504), true),
            (&transient, Status(501), false),
            (&transient, Status(505), false),
            (&transient, Status(400), false),
            (&transient, Status(401), false),
            (&transient, Status(404), false),
            (&transient, Status(410), false),
            (&transient, Status(422), false),
            (&transient, Status(301), false),
            (&transient, Status(302), false),
            (&transient, Status(307), false),
            (&transient, Timeout, true),
            (&transient, Connect, true),
            (&transient, Dns, true),
            (&transient, Tls, true),
            (&transient, Other, true),
            (&transient, BodyTooLarge, false),
            (&transient, BlockedTarget, false),
            (&codes, Status(409), true),
            (&codes, Status(503), true),
            (&codes, Status(500), false),
            (&codes, Status(429), false),
            (&codes, Status(404), false),
            (&codes, Status(302), false),
            (&codes, Timeout, true),
            (&codes, Connect, true),
            (&codes, Dns, true),
            (&codes, Tls, true),
            (&codes, Other, true),
            (&codes, BodyTooLarge, false),
            (&codes, BlockedTarget, false),
        ];
        for (policy, failure, want) in table {
            assert_eq!(policy.is_retryable(*failure), *want, "{:?} {failure:?}", policy.retry_on);
        }
    }

    #[test]
    fn dead_reason_text_round_trips() {
        for &r in DeadReason::ALL {
            assert_eq!(DeadReason::parse(r.as_str()), Some(r));
            assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{r}\""));
        }
        assert_eq!(DeadReason::NonRetryable.as_str(), "non_retryable");
        assert_eq!(DeadReason::AttemptsExhausted.as_str(), "attempts_exhausted");
        assert_eq!(DeadReason::parse("nope"), None);
    }

    #[test]
    fn non_retryable_wins_over_exhausted_and_expired() {
        let p = RetryPolicy::preset(Preset::Eventarc);
        let next = p.after_failure(Failure::Status(400), 5, 90_000 * S, None, None, 0.0);
        assert_eq!(next, Next::Dead(DeadReason::NonRetryable));
        let next = p.after_failure(Failure::BlockedTarget, 1, 0, None, None, 0.0);
        assert_eq!(next, Next::Dead(DeadReason::NonRetryable));
    }

    #[test]
    fn exhausted_exactly_at_max_attempts_and_before_expired() {
        let p = RetryPolicy::preset(Preset::Eventarc);
        assert_eq!(p.after_failure(Failure::Timeout, 4, 0, None, None, 0.0), Next::RetryInMs(8 * S));
        let exhausted = Next::Dead(DeadReason::AttemptsExhausted);
        assert_eq!(p.after_failure(Failure::Timeout, 5, 0, None, None, 0.0), exhausted);
        assert_eq!(p.after_failure(Failure::Timeout, 6, 90_000 * S, None, None, 0.0), exhausted);
    }

    #[test]
    fn ttl_expiry() {
        let fixed = Schedule::Fixed { delays_secs: vec![10], jitter: 0.0 };
        let p = custom(fixed, 10, 100, RetryOn::All);
        let expired = Next::Dead(DeadReason::Expired);
        // Landing exactly on the TTL is still allowed; one millisecond later is not.
        assert_eq!(p.after_failure(Failure::Connect, 1, 90 * S, None, None, 0.0), Next::RetryInMs(10 * S));
        assert_eq!(p.after_failure(Failure::Connect, 1, 90 * S + 1, None, None, 0.0), expired);
        assert_eq!(p.after_failure(Failure::Connect, 1, 100 * S + 1, None, Some(0), 0.0), expired);
        assert!(!p.is_expired(100 * S));
        assert!(p.is_expired(100 * S + 1));
    }

    #[test]
    fn retry_after_is_honoured_for_429_and_503_and_clamped_to_the_ttl() {
        let p = RetryPolicy::default_policy();
        let ttl = 86_400 * S;
        let next = p.after_failure(Failure::Status(503), 1, 0, None, Some(20 * S), 1.0);
        assert_eq!(next, Next::RetryInMs(20 * S));
        let next = p.after_failure(Failure::Status(429), 1, ttl - 5 * S, None, Some(60 * S), 0.0);
        assert_eq!(next, Next::RetryInMs(5 * S));
        // Ignored for any other status: the schedule applies.
        let next = p.after_failure(Failure::Status(500), 1, 0, None, Some(60 * S), 0.0);
        assert_eq!(next, Next::RetryInMs(10 * S));
        let next = p.after_failure(Failure::Timeout, 2, 0, None, Some(60 * S), 0.0);
        assert_eq!(next, Next::RetryInMs(30 * S));
    }

    #[test]
    fn retry_after_only_lengthens_the_wait() {
        let p = RetryPolicy::default_policy();
        assert_eq!(p.after_failure(Failure::Status(503), 1, 0, Some(0), Some(0), 0.0), Next::RetryInMs(10 * S));
        assert_eq!(p.after_failure(Failure::Status(429), 2, 0, None, Some(5 * S), 0.0), Next::RetryInMs(30 * S));
        assert_eq!(p.after_failure(Failure::Status(429), 2, 0, None, Some(45 * S), 0.0), Next::RetryInMs(45 * S));
    }

    #[test]
    fn retries_are_due_from_the_first_failure_however_long_the_attempts_took() {
        let p = RetryPolicy::preset(Preset::Workfront);
        let unit = WORKFRONT_UNIT_MS;
        // The first failure starts the schedule: retry 1 is one unit later.
        assert_eq!(p.after_failure(Failure::Timeout, 1, 0, Some(0), None, 0.0), Next::RetryInMs(unit));
        // Retry 3 is due 7 units after the first failure; retry 2, due 3 units after it, took 50 s
        // to fail, which does not move retry 3.
        let since = 3 * unit + 50 * S;
        assert_eq!(
            p.after_failure(Failure::Timeout, 3, since, Some(since), None, 0.0),
            Next::RetryInMs(7 * unit - since)
        );
        // A retry whose time has passed is due at once.
        let late = 8 * unit;
        assert_eq!(p.after_failure(Failure::Timeout, 3, late, Some(late), None, 0.0), Next::RetryInMs(0));
    }

    #[test]
    fn retry_after_does_not_revive_a_non_retryable_status() {
        let p = with_retry_on(RetryOn::Codes(vec![500]));
        let next = p.after_failure(Failure::Status(429), 1, 0, None, Some(S), 0.0);
        assert_eq!(next, Next::Dead(DeadReason::NonRetryable));
    }

    #[test]
    fn event_grid_jitter_is_ten_percent_either_way() {
        let p = RetryPolicy::default_policy();
        assert_eq!(p.after_failure(Failure::Other, 1, 0, None, None, -1.0), Next::RetryInMs(9 * S));
        assert_eq!(p.after_failure(Failure::Other, 1, 0, None, None, 1.0), Next::RetryInMs(11 * S));
        assert_eq!(p.after_failure(Failure::Other, 1, 0, None, None, 0.5), Next::RetryInMs(10_500));
        assert_eq!(p.after_failure(Failure::Other, 7, 0, None, None, 1.0), Next::RetryInMs(3_960 * S));
        // Out-of-range units are clamped rather than trusted.
        assert_eq!(p.after_failure(Failure::Other, 1, 0, None, None, 7.0), Next::RetryInMs(11 * S));
        assert_eq!(p.after_failure(Failure::Other, 1, 0, None, None, f64::NAN), Next::RetryInMs(10 * S));
    }

    fn failure_strategy() -> impl Strategy<Value = Failure> {
        prop_oneof![
            (100u16..=599).prop_map(Failure::Status),
            Just(Failure::Status(429)),
            Just(Failure::Status(503)),
            Just(Failure::Timeout),
            Just(Failure::Connect),
            Just(Failure::Other),
            Just(Failure::Auth),
        ]
    }

    proptest! {
        #[test]
        fn never_retries_once_attempts_are_spent(
            p in policy_strategy(),
            failure in failure_strategy(),
            extra in 0u32..5,
            age_ms in 0u64..700_000_000,
            retry_after_ms in prop::option::of(0u64..1_000_000_000),
            unit in -1.0..=1.0f64,
        ) {
            let next = p.after_failure(failure, p.max_attempts + extra, age_ms, None, retry_after_ms, unit);
            prop_assert!(!matches!(next, Next::RetryInMs(_)));
        }

        #[test]
        fn retry_delay_is_jittered_base_or_clamped_retry_after(
            p in policy_strategy(),
            failure in failure_strategy(),
            attempts_made in 1u32..100,
            age_ms in 0u64..700_000_000,
            retry_after_ms in prop::option::of(0u64..1_000_000_000),
            unit in -1.0..=1.0f64,
        ) {
            let Next::RetryInMs(delay) =
                p.after_failure(failure, attempts_made, age_ms, None, retry_after_ms, unit)
            else {
                return Ok(());
            };
            let ttl_ms = u64::from(p.ttl_secs) * 1_000;
            prop_assert!(age_ms + delay <= ttl_ms, "never past the TTL");
            let honoured = matches!(failure, Failure::Status(429 | 503));
            let base = p.base_delay_ms(attempts_made) as f64;
            let spread = base * p.jitter_fraction() + 0.5;
            match retry_after_ms {
                Some(wait) if honoured => {
                    let remaining = ttl_ms - age_ms;
                    prop_assert!(delay >= wait.min(remaining), "Retry-After only lengthens the wait");
                    prop_assert!(delay as f64 >= (base - spread).min(remaining as f64), "nor shortens the policy's");
                }
                _ => prop_assert!((delay as f64 - base).abs() <= spread, "{} vs {}", delay, base),
            }
        }

        #[test]
        fn a_retry_is_due_at_the_first_failure_plus_the_delays_so_far(
            p in policy_strategy(),
            attempts_made in 1u32..60,
            since_first_failure_ms in 0u64..400_000_000,
            unit in -1.0..=1.0f64,
        ) {
            let next = p.after_failure(
                Failure::Timeout, attempts_made, since_first_failure_ms, Some(since_first_failure_ms), None, unit,
            );
            let Next::RetryInMs(delay) = next else { return Ok(()) };
            let base = p.base_delay_ms(attempts_made) as f64;
            let spread = base * p.jitter_fraction() + 0.5;
            let due = (p.offset_ms(attempts_made - 1) as f64 + base, spread);
            if delay > 0 {
                let at = (since_first_failure_ms + delay) as f64;
                prop_assert!((at - due.0).abs() <= due.1, "due {} after the first failure, not {}", at, due.0);
            } else {
                prop_assert!(since_first_failure_ms as f64 >= due.0 - due.1, "due at once only when its time has passed");
            }
        }
    }
}
