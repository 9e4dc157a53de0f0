//! Wake-ups of the lanes: in this process when messages are committed or a
//! permit is freed, and from other processes sharing a PostgreSQL database
//! through the store's NOTIFY.

use std::sync::Mutex;

use domain::ids::EndpointId;
use sea_orm::DatabaseConnection;
use tokio::sync::{Notify, watch};

use super::retry_times::RetryTimes;
use crate::store::health::DatabaseHealth;
use crate::store::messages::Lane;
use crate::store::notify;

/// Endpoints with messages stored pending that the fresh lane has yet to take note of.
const MAX_BACKLOG: usize = 4096;

/// Wakes the lanes: to claim everything due (messages came due, of endpoints
/// unknown), or a nudge to check again what they hold and know (an endpoint's
/// or a worker's permit was freed, or messages were stored for known
/// endpoints). A `Notify` keeps one wake-up while a lane is busy, so none is lost.
pub struct Wakeup {
    /// Names this process in the wake-ups it sends other processes, so that it
    /// ignores its own.
    origin: String,
    fresh: Notify,
    retry: Notify,
    fresh_nudge: Notify,
    retry_nudge: Notify,
    retry_times: Mutex<RetryTimes>,
    /// Endpoints this process stored due first attempts for, since the fresh lane last took them.
    backlog: Mutex<Vec<EndpointId>>,
}

impl Default for Wakeup {
    fn default() -> Wakeup {
        Wakeup {
            origin: format!("{:016x}", rand::random::<u64>()),
            fresh: Notify::new(),
            retry: Notify::new(),
            fresh_nudge: Notify::new(),
            retry_nudge: Notify::new(),
            retry_times: Mutex::default(),
            backlog: Mutex::default(),
        }
    }
}

impl Wakeup {
    pub fn notify_one(&self) {
        self.fresh.notify_one();
        self.retry.notify_one();
    }
    pub fn origin(&self) -> &str {
        &self.origin
    }
    pub(crate) fn of(&self, lane: Lane) -> &Notify {
        match lane {
            Lane::Fresh => &self.fresh,
            Lane::Retry => &self.retry,
        }
    }
    /// A retry was scheduled for `at_ms`: the retry lane claims again then.
    pub(crate) fn retry_at(&self, at_ms: i64) {
        self.retry_times.lock().expect("retry times").add(at_ms);
        self.retry.notify_one();
    }
    /// First attempts were stored due for these endpoints: the fresh lane claims
    /// them endpoint by endpoint, as each runs low in the lane, rather than everything due.
    pub(crate) fn stored_for(&self, endpoints: impl IntoIterator<Item = EndpointId>) {
        let mut backlog = self.backlog.lock().expect("backlog");
        // Bounded while no lane takes them (none runs): the lanes' poll finds any messages anyway.
        let left = MAX_BACKLOG.saturating_sub(backlog.len());
        backlog.extend(endpoints.into_iter().take(left));
        drop(backlog);
        self.fresh_nudge.notify_one();
    }
    pub(super) fn take_backlog(&self) -> Vec<EndpointId> {
        std::mem::take(&mut *self.backlog.lock().expect("backlog"))
    }
    pub(super) fn next_retry_after(&self, now_ms: i64) -> Option<i64> {
        self.retry_times.lock().expect("retry times").next_after(now_ms)
    }
    /// Permits in the lanes were freed: waiting messages may start, and a lane may claim.
    pub(crate) fn permits_freed(&self) {
        self.fresh_nudge.notify_one();
        self.retry_nudge.notify_one();
    }
    pub(super) fn nudge_of(&self, lane: Lane) -> &Notify {
        match lane {
            Lane::Fresh => &self.fresh_nudge,
            Lane::Retry => &self.retry_nudge,
        }
    }
}

/// Wakes the lanes on every other process's notification until shutdown.
pub async fn listen(
    db: DatabaseConnection,
    health: std::sync::Arc<DatabaseHealth>,
    wake: std::sync::Arc<Wakeup>,
    shutdown: watch::Receiver<bool>,
) {
    let notified = |origin: &str| {
        if origin != wake.origin() {
            wake.notify_one();
        }
    };
    notify::listen(db, health, notified, shutdown).await
}
