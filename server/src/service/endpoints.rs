//! Endpoints: the circuit of each target URL, and the admin's unlock.

use domain::dto::{self, Backlog};
use domain::ids::EndpointId;
use domain::operational::EndpointReport;
use domain::states::EndpointState;
use sea_orm::TransactionTrait;
use serde_json::json;

use super::Services;
use super::{Principal, Result, ServiceError, audit, idempotency, views};
use crate::pipeline::Due;
use crate::pipeline::operational::{report_dead, report_endpoints};
use crate::store::endpoints::{circuit_of, save_circuit};
use crate::store::page::{self, PageRequest};
use crate::store::{endpoints, messages};

pub async fn list(
    services: &Services,
    who: &Principal,
    customer_id: Option<&str>,
    page: PageRequest,
) -> Result<dto::Page<dto::Endpoint>> {
    let rows = endpoints::list(&services.db, who.customer_filter(customer_id).as_ref(), &page).await?;
    let (rows, next_cursor) = page::finish(rows, page.limit, |r| &r.id);
    let (now, window_ms) = (services.now_ms(), services.settings.breaker.window_secs as i64 * 1000);
    Ok(dto::Page::of(rows.into_iter().map(|r| views::endpoint(r, now, window_ms)).collect(), next_cursor))
}

/// Closes a disabled or locked endpoint's circuit, resets its counters, does
/// with the messages the lock held as `backlog` says, and records who did it,
/// all in one transaction. A closed endpoint has nothing to unlock: 409, and
/// nothing is written.
pub async fn unlock(services: &Services, who: &Principal, id: &EndpointId, backlog: Backlog) -> Result<dto::Endpoint> {
    who.require_writer()?;
    who.require_admin()?;
    let now = services.now_ms();
    let txn = services.db.begin().await?;
    let row = endpoints::lock_many(&txn, vec![id.clone()])
        .await?
        .into_iter()
        .next()
        .ok_or(ServiceError::NotFound("endpoint"))?;
    if row.state == EndpointState::Closed {
        return Err(ServiceError::Conflict("the endpoint is closed: there is nothing to unlock".into()));
    }
    let mut circuit = circuit_of(&row);
    circuit.unlock();
    save_circuit(&txn, id, &circuit, now).await?;
    let ended = match backlog {
        Backlog::Deliver => Vec::new(),
        Backlog::Dead => messages::end_held(&txn, id, None, now).await?,
        Backlog::DeadOlderThan { secs } => messages::end_held(&txn, id, Some(now - secs * 1000), now).await?,
    };
    // The rest of the held messages, and those deferred to the next probe, are due now.
    let released = messages::release_endpoint(&txn, id, row.next_probe_at.unwrap_or(now).max(now), now).await?;
    // The customer is told, in the same transaction, of the closed circuit and the ended messages.
    let breaker = services.settings.breaker.config();
    let report = EndpointReport::of(id, &row.url, &circuit, "unlocked", now, &breaker);
    let mut announced = report_endpoints(&services.pipeline, &txn, vec![(row.customer_id.clone(), report)]).await?;
    announced.merge(report_dead(&services.pipeline, &txn, &ended).await?);
    let mut detail = json!({
        "url": row.url, "previous_state": row.state, "backlog": backlog.as_str(),
        "released_messages": released, "dead_messages": ended.len(),
    });
    if let Backlog::DeadOlderThan { secs } = backlog {
        detail["older_than_secs"] = secs.into();
    }
    audit::record(&txn, services, who, "endpoint.unlock", id, Some(&row.customer_id), detail).await?;
    let row = endpoints::get(&txn, id).await?.ok_or(ServiceError::NotFound("endpoint"))?;
    let unlocked = views::endpoint(row, now, services.settings.breaker.window_secs as i64 * 1000);
    idempotency::keep_answer(&txn, Some(&unlocked)).await?;
    services.pipeline.commit_and_wake(txn, Due::anything().and(announced)).await?;
    Ok(unlocked)
}
