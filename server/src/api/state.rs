//! What the REST handlers share: the services, and the API's own concerns
//! (the publish rate limit, the API keys seen recently, the metrics' renderer).

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;

use super::key_cache::KeyCache;
use super::rate_limit::PublishLimiter;
use crate::service::Services;

/// One reference count for the handlers to clone at every request; it reads
/// as the [`Services`] it holds.
#[derive(Clone)]
pub struct ApiState(Arc<Parts>);

struct Parts {
    services: Services,
    metrics: PrometheusHandle,
    publish_limiter: PublishLimiter,
    keys: KeyCache,
}

impl ApiState {
    pub fn new(services: Services, metrics: PrometheusHandle) -> ApiState {
        let publish_limiter = PublishLimiter::new(&services.settings.limits);
        ApiState(Arc::new(Parts { services, metrics, publish_limiter, keys: KeyCache::default() }))
    }

    pub(super) fn metrics(&self) -> &PrometheusHandle {
        &self.0.metrics
    }

    /// Publish budgets per API key.
    pub(super) fn publish_limiter(&self) -> &PublishLimiter {
        &self.0.publish_limiter
    }

    /// API keys seen recently.
    pub(super) fn keys(&self) -> &KeyCache {
        &self.0.keys
    }
}

impl std::ops::Deref for ApiState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0.services
    }
}
