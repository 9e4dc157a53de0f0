//! Wake-ups of the lanes: in this process when messages are committed or a
//! permit is freed, and from other processes sharing a PostgreSQL database
//! through the store's NOTIFY.

use std::sync::Mutex;

use domain::ids::EndpointId;
use sea_orm::DatabaseConnection;
use tokio::sync::{Notify, watch};

use super::operational::Announced;
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

/// What a transaction made due, for the lanes to take up once it has committed
/// (`Pipeline::commit_and_wake`): other processes are told by a NOTIFY sent in
/// the transaction, this one's lanes after the commit.
#[derive(Debug, Default)]
#[must_use = "the lanes learn of what is due only from Pipeline::commit_and_wake"]
pub struct Due {
    /// Messages of any endpoint: both lanes claim everything due.
    anything: bool,
    /// First attempts stored for these endpoints, which the fresh lane claims endpoint by endpoint.
    endpoints: Vec<EndpointId>,
    /// Operational events stored with the change, and the deaths they report.
    announced: Announced,
}

impl Due {
    /// Nothing became due: no NOTIFY, no wake-up.
    pub fn nothing() -> Due {
        Due::default()
    }

    /// Messages became due, of endpoints the lanes may not know.
    pub fn anything() -> Due {
        Due { anything: true, ..Due::default() }
    }

    /// `anything()` when `cond` holds, else `nothing()`.
    pub fn anything_if(cond: bool) -> Due {
        Due { anything: cond, ..Due::default() }
    }

    /// First attempts were stored for this endpoint.
    pub fn first_attempts_of(endpoint: EndpointId) -> Due {
        Due::nothing().and_first_attempts_of(endpoint)
    }

    /// And first attempts were stored for this endpoint.
    pub fn and_first_attempts_of(mut self, endpoint: EndpointId) -> Due {
        self.endpoints.push(endpoint);
        self
    }

    /// And the operational events the change stored.
    pub fn and(mut self, announced: Announced) -> Due {
        self.announced.merge(announced);
        self
    }

    /// Whether other processes are to be told.
    pub(super) fn is_news(&self) -> bool {
        self.anything || !self.endpoints.is_empty() || !self.announced.endpoints.is_empty()
    }
}

impl From<Announced> for Due {
    fn from(announced: Announced) -> Due {
        Due::nothing().and(announced)
    }
}

impl Wakeup {
    /// Wakes this process's lanes for what a committed transaction made due.
    pub(super) fn woken(&self, due: Due) {
        if due.anything {
            self.notify_one();
        }
        let mut endpoints = due.endpoints;
        endpoints.extend(due.announced.count_deaths());
        if !endpoints.is_empty() {
            self.stored_for(endpoints);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_due_is_told_once_committed() {
        assert!(!Due::nothing().is_news(), "nothing due sends no NOTIFY");
        assert!(Due::anything().is_news() && !Due::anything_if(false).is_news());
        let mut announced = Announced::default();
        announced.endpoints.push("end_b".into());
        let due = Due::first_attempts_of("end_a".into()).and(announced);
        assert!(due.is_news(), "operational events' messages are news to other processes");
        let wake = Wakeup::default();
        wake.woken(due);
        let woken: Vec<EndpointId> = wake.take_backlog();
        assert_eq!(woken, [EndpointId::from("end_a"), EndpointId::from("end_b")]);
        wake.woken(Due::nothing());
        assert!(wake.take_backlog().is_empty());
    }
}
