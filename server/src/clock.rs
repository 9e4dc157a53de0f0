//! Time as a dependency: the worker and services read the clock through this
//! trait, so tests can walk hours of schedule without waiting.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, TimeZone, Utc};

pub trait Clock: Send + Sync + 'static {
    /// Unix milliseconds.
    fn now_ms(&self) -> i64;
}

pub type SharedClock = Arc<dyn Clock>;

pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        Utc::now().timestamp_millis()
    }
}

/// A clock that moves only when told to.
#[derive(Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn starting_at(ms: i64) -> Arc<ManualClock> {
        Arc::new(ManualClock(AtomicI64::new(ms)))
    }
    pub fn advance_ms(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
    pub fn set_ms(&self, ms: i64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Milliseconds to a UTC time for JSON (RFC 3339).
pub fn to_utc(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}
