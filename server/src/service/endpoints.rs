//! Endpoints: the circuit of each target URL, and the admin's unlock.

use app::domain::dto;
use sea_orm::TransactionTrait;
use serde_json::json;

use super::Services;
use super::customers::audit_row;
use super::{Principal, Result, ServiceError, views};
use crate::store::endpoints::{circuit_of, save_circuit};
use crate::store::page::{self, PageRequest};
use crate::store::{audit, endpoints, messages, notify};

pub async fn list(
    services: &Services,
    who: &Principal,
    customer_id: Option<&str>,
    page: PageRequest,
) -> Result<dto::Page<dto::Endpoint>> {
    let rows = endpoints::list(&services.db, who.customer_filter(customer_id).as_deref(), &page).await?;
    let (rows, next_cursor) = page::finish(rows, page.limit, |r| &r.id);
    let (now, window_ms) = (services.now_ms(), services.settings.breaker.window_secs as i64 * 1000);
    Ok(dto::Page { data: rows.into_iter().map(|r| views::endpoint(r, now, window_ms)).collect(), next_cursor })
}

/// Closes the circuit, resets its counters, makes held messages due now, and
/// records who did it.
pub async fn unlock(services: &Services, who: &Principal, id: &str) -> Result<dto::Endpoint> {
    who.require_admin()?;
    let row = endpoints::get(&services.db, id).await?.ok_or(ServiceError::NotFound("endpoint"))?;
    let now = services.now_ms();
    let mut circuit = circuit_of(&row);
    circuit.unlock();
    let txn = services.db.begin().await?;
    save_circuit(&txn, id, &circuit, now).await?;
    // Held messages, and those deferred to the next probe, are due now.
    let released = messages::release_endpoint(&txn, id, row.next_probe_at.unwrap_or(now).max(now), now).await?;
    notify::send(&txn, services.pipeline.wake.origin()).await?;
    let detail = json!({"url": row.url, "previous_state": row.state, "released_messages": released});
    audit::insert(&txn, audit_row(services, who, "endpoint.unlock", id, detail)).await?;
    txn.commit().await?;
    services.pipeline.wake.notify_one();
    let row = endpoints::get(&services.db, id).await?.ok_or(ServiceError::NotFound("endpoint"))?;
    Ok(views::endpoint(row, services.now_ms(), services.settings.breaker.window_secs as i64 * 1000))
}
