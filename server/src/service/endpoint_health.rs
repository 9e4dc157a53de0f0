//! An endpoint's page: its circuit, its health over the last 24 hours (see
//! `store::endpoint_health` for what each read costs), and the replay of the
//! dead messages of one kind of failure.

use domain::dto::{self, Choice, EndpointHealth};
use domain::health::{self, FailureKind};
use domain::ids::EndpointId;

use super::{Principal, Result, ServiceError, Services, replays, views};
use crate::store::endpoint_health::{self as store, HealthWindow, SCANNED};
use crate::store::entities::endpoint;
use crate::store::{customers, endpoints, subscriptions};

async fn visible(services: &Services, who: &Principal, id: &EndpointId) -> Result<endpoint::Model> {
    endpoints::get(&services.db, id)
        .await?
        .filter(|e| who.sees(&e.customer_id))
        .ok_or(ServiceError::NotFound("endpoint"))
}

pub async fn health(services: &Services, who: &Principal, id: &EndpointId) -> Result<EndpointHealth> {
    let row = visible(services, who, id).await?;
    let now = services.now_ms();
    let w = HealthWindow { customer_id: &row.customer_id, endpoint_id: &row.id, since_ms: health::window_start(now) };
    let txn = store::reads_by_key(&services.db).await?;
    let summary = health::summarize(&store::tallies(&txn, w, SCANNED).await?, now);
    let (capped, oldest_read) = store::coverage(&txn, w, SCANNED).await?;
    let mut times = store::times_to_deliver(&txn, w, SCANNED).await?;
    times.sort_unstable();
    let mut failures = summary.failures;
    for group in &mut failures {
        let Some(kind) = FailureKind::parse(&group.kind) else { continue };
        if let Some((body, message_id)) = store::latest_failure(&txn, w, kind, SCANNED).await? {
            group.latest_body = body;
            group.latest_message_id = Some(message_id);
        }
    }
    txn.commit().await?;
    let customer_name = match who {
        Principal::Admin { .. } => customers::get(&services.db, &row.customer_id).await?.map(|c| c.name),
        Principal::Customer { .. } | Principal::Viewer { .. } => None,
    };
    let subscriptions = subscriptions::of_endpoint(&services.db, &row.customer_id, &row.id)
        .await?
        .into_iter()
        .map(|s| Choice { value: s.id.into(), label: s.name })
        .collect();
    let window_ms = services.settings.breaker.window_secs as i64 * 1000;
    Ok(EndpointHealth {
        endpoint: views::endpoint(row, now, window_ms),
        customer_name,
        subscriptions,
        attempts: summary.attempts,
        attempts_capped: capped,
        counted_since_ms: if capped { oldest_read } else { summary.earliest_ms },
        succeeded: summary.succeeded,
        p50_ms: health::percentile(&times, 50),
        p95_ms: health::percentile(&times, 95),
        deliveries_measured: times.len() as u64,
        deliveries_capped: capped,
        hourly: summary.hourly,
        failures,
    })
}

/// Starts replaying the dead messages whose last attempt, in the last 24 hours, failed
/// with `kind` (a status code such as `503`, or an error kind such as `timeout`).
pub async fn replay_failures(
    services: &Services,
    who: &Principal,
    id: &EndpointId,
    kind: &str,
) -> Result<dto::ReplayStarted> {
    who.require_writer()?;
    let failure = FailureKind::parse(kind)
        .ok_or_else(|| ServiceError::field("kind", "must be a status code (100 to 999) or an error kind"))?;
    let row = visible(services, who, id).await?;
    let w = HealthWindow {
        customer_id: &row.customer_id,
        endpoint_id: &row.id,
        since_ms: health::window_start(services.now_ms()),
    };
    let txn = store::reads_by_key(&services.db).await?;
    let ids = store::dead_of_kind(&txn, w, failure, SCANNED).await?;
    txn.commit().await?;
    replays::start_listed(services, who, (row.customer_id.clone(), row.id.as_str()), &failure.key(), ids).await
}
