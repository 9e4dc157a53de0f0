//! What every request handler and worker shares.

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use sea_orm::DatabaseConnection;

use crate::api::key_cache::KeyCache;
use crate::api::rate_limit::PublishLimiter;
use crate::clock::SharedClock;
use crate::config::Settings;
use crate::secrets::Sealer;
use crate::service::intake::Intake;
use crate::worker::Wakeup;
use crate::worker::handoff::Handoff;

/// The shared parts behind one pointer: handlers and tasks clone the state
/// at every request and delivery, and one reference count is cheaper to move
/// than one per part.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> AppState {
        AppState(Arc::new(shared))
    }

    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

pub struct Shared {
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
    /// API keys seen recently.
    pub keys: Arc<KeyCache>,
    /// Writes publishes, many per transaction.
    pub intake: Intake,
    /// Passes fresh messages from the intake to the running fresh lane.
    pub handoff: Arc<Handoff>,
}
