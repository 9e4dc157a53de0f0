//! What every request handler and worker shares.

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use sea_orm::DatabaseConnection;

use crate::clock::SharedClock;
use crate::config::Settings;
use crate::worker::Wakeup;

#[derive(Clone)]
pub struct AppState {
    pub db: DatabaseConnection,
    pub settings: Arc<Settings>,
    pub clock: SharedClock,
    /// Wakes the dispatcher the moment new messages are committed.
    pub wake: Arc<Wakeup>,
    pub metrics: PrometheusHandle,
}

impl AppState {
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
}
