//! Whether the database answers: the health check's one question.

use std::time::Duration;

use super::Services;
use crate::store::health;

/// `None` when the database answered a round trip within `deadline`; otherwise why not (an
/// outage already known is answered at once, without a try).
pub async fn database_problem(services: &Services, deadline: Duration) -> Option<String> {
    let health = &services.pipeline.health;
    if health.is_down() {
        return Some(health.outage_error().unwrap_or_default());
    }
    let answered = tokio::time::timeout(deadline, health::ping(&services.db)).await;
    match answered.unwrap_or_else(|_| Err(health::too_slow(deadline))) {
        Ok(()) => None,
        Err(e) => {
            health.failed("the health check", &e);
            Some(e.to_string())
        }
    }
}
