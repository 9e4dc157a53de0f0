//! The publish rate limit: a token bucket per API key (off unless
//! `limits.publish_per_sec` is set). The bucket is a pure rule on the clock's
//! milliseconds, so tests move a manual clock instead of waiting.

use std::sync::Mutex;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use foldhash::HashMap;

use super::problem::ApiError;
use super::state::ApiState;
use crate::config::LimitSettings;
use crate::service::Principal;

/// Tokens refill continuously at `per_sec`, up to `burst`; each publish takes one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBucket {
    tokens: f64,
    at_ms: i64,
}

impl TokenBucket {
    pub fn full(burst: u32, now_ms: i64) -> TokenBucket {
        TokenBucket { tokens: f64::from(burst), at_ms: now_ms }
    }

    /// Takes a token at `now_ms`, or says how many milliseconds until one is there.
    pub fn take(&mut self, now_ms: i64, per_sec: f64, burst: u32) -> Result<(), u64> {
        let elapsed_ms = (now_ms - self.at_ms).max(0) as f64;
        self.tokens = (self.tokens + elapsed_ms * per_sec / 1000.0).min(f64::from(burst));
        self.at_ms = self.at_ms.max(now_ms);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            // Less a hair, so that float rounding never adds a whole millisecond.
            Err(((1.0 - self.tokens) * 1000.0 / per_sec - 1e-6).ceil().max(1.0) as u64)
        }
    }

    fn is_full(&self, now_ms: i64, per_sec: f64, burst: u32) -> bool {
        self.tokens + (now_ms - self.at_ms).max(0) as f64 * per_sec / 1000.0 >= f64::from(burst)
    }
}

/// Buckets stay in memory; beyond this many, the ones that have refilled are dropped (a full
/// bucket is the same as no bucket).
const PRUNE_ABOVE: usize = 10_000;

pub struct PublishLimiter {
    per_sec: f64,
    burst: u32,
    buckets: Mutex<HashMap<String, TokenBucket>>,
}

impl PublishLimiter {
    pub fn new(limits: &LimitSettings) -> PublishLimiter {
        PublishLimiter { per_sec: limits.publish_per_sec, burst: limits.publish_burst, buckets: Mutex::default() }
    }

    /// Ok when `key` may publish now; else the whole seconds to wait (for `Retry-After`).
    pub fn check(&self, key: &str, now_ms: i64) -> Result<(), u64> {
        if self.per_sec <= 0.0 {
            return Ok(());
        }
        let (per_sec, burst) = (self.per_sec, self.burst);
        let mut buckets = self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if buckets.len() > PRUNE_ABOVE {
            buckets.retain(|_, bucket| !bucket.is_full(now_ms, per_sec, burst));
        }
        let bucket = buckets.entry(key.to_string()).or_insert_with(|| TokenBucket::full(burst, now_ms));
        bucket.take(now_ms, per_sec, burst).map_err(|wait_ms| wait_ms.div_ceil(1000).max(1))
    }
}

/// A caller allowed to publish now. It is extracted before the body, so a client over its rate
/// costs no reading or parsing.
pub struct PublishPermit(pub Principal);

impl FromRequestParts<ApiState> for PublishPermit {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        let who = Principal::from_request_parts(parts, state).await?;
        state.publish_limiter().check(who.actor(), state.now_ms()).map_err(ApiError::RateLimited)?;
        Ok(PublishPermit(who))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(per_sec: f64, burst: u32) -> PublishLimiter {
        PublishLimiter::new(&LimitSettings {
            publish_per_sec: per_sec,
            publish_burst: burst,
            ..LimitSettings::default()
        })
    }

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let mut b = TokenBucket::full(3, 0);
        assert_eq!((b.take(0, 2.0, 3), b.take(0, 2.0, 3), b.take(0, 2.0, 3)), (Ok(()), Ok(()), Ok(())));
        assert_eq!(b.take(0, 2.0, 3), Err(500), "one token every 500 ms at 2/s");
        assert_eq!(b.take(499, 2.0, 3), Err(1));
        assert_eq!(b.take(500, 2.0, 3), Ok(()));
        assert_eq!(b.take(10_000, 2.0, 3), Ok(()), "refills to the burst, no further");
        assert_eq!((b.take(10_000, 2.0, 3), b.take(10_000, 2.0, 3)), (Ok(()), Ok(())));
        assert!(b.take(10_000, 2.0, 3).is_err());
    }

    #[test]
    fn a_clock_going_backwards_never_adds_tokens() {
        let mut b = TokenBucket::full(1, 5_000);
        assert_eq!(b.take(5_000, 1.0, 1), Ok(()));
        assert!(b.take(0, 1.0, 1).is_err());
        assert!(b.take(5_999, 1.0, 1).is_err());
        assert_eq!(b.take(6_000, 1.0, 1), Ok(()));
    }

    #[test]
    fn keys_have_separate_buckets_and_off_means_unlimited() {
        let l = limiter(1.0, 2);
        assert!(l.check("key_a", 0).is_ok() && l.check("key_a", 0).is_ok());
        assert_eq!(l.check("key_a", 0), Err(1), "Retry-After in whole seconds, at least 1");
        assert!(l.check("key_b", 0).is_ok(), "another key is not limited by key_a");
        let off = limiter(0.0, 1);
        assert!((0..1000).all(|_| off.check("key_a", 0).is_ok()));
        let slow = limiter(0.1, 1);
        assert!(slow.check("k", 0).is_ok());
        assert_eq!(slow.check("k", 0), Err(10));
    }
}
