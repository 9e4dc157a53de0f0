//! What every request handler and worker shares.

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use sea_orm::DatabaseConnection;

use crate::api::rate_limit::PublishLimiter;
use crate::clock::SharedClock;
use crate::config::Settings;
use crate::secrets::Sealer;
use crate::worker::Wakeup;

#[derive(Clone)]
pub struct AppState {
    pub db: DatabaseConnection,
    pub settings: Arc<Settings>,
    pub clock: SharedClock,
    /// Wakes the dispatcher the moment new messages are committed.
    pub wake: Arc<Wakeup>,
    pub metrics: PrometheusHandle,
    /// Seals subscription secrets before they are stored, and opens them to sign.
    pub sealer: Arc<Sealer>,
    /// Publish budgets per API key.
    pub publish_limiter: Arc<PublishLimiter>,
}

impl AppState {
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
}
