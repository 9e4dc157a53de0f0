//! The audit trail: every change made through the API or the dashboard writes
//! one row in the change's own transaction (who, what, on which object, for
//! which customer, and a small JSON of the change, never a secret). Herald's
//! own circuit changes are written by the pipeline with the actor `system`.

use domain::dto;
use domain::ids::CustomerId;
use domain::query::{AuditQuery, TimeParam, text_of};
use sea_orm::{ConnectionTrait, DbErr};
use serde_json::Value;

use super::{Principal, Result, Services, views};
use crate::store::audit::{self, AuditFilter};
use crate::store::page::{self, PageRequest};

/// Writes the row of a change, inside the change's transaction `db`.
pub async fn record(
    db: &impl ConnectionTrait,
    services: &Services,
    who: &Principal,
    action: &str,
    target: &str,
    customer_id: Option<&CustomerId>,
    detail: Value,
) -> std::result::Result<(), DbErr> {
    let row = audit::row(services.now_ms(), who.actor(), action, target, customer_id, detail.to_string());
    audit::insert(db, row).await
}

/// A read of the log: by action, object and time; the admin reads every row
/// (or one customer's), a customer's key only its own.
pub async fn list(
    services: &Services,
    who: &Principal,
    q: &AuditQuery,
    page: PageRequest,
) -> Result<dto::Page<dto::AuditEntry>> {
    let filter = AuditFilter {
        customer_id: who.customer_filter(text_of(&q.customer_id)),
        action: text_of(&q.action).map(str::to_string),
        target: text_of(&q.object_id).map(str::to_string),
        since_ms: q.since.map(|TimeParam(ms)| ms),
        until_ms: q.until.map(|TimeParam(ms)| ms),
    };
    let rows = audit::list(&services.db, &filter, &page).await?;
    let (rows, next_cursor) = page::finish(rows, page.limit, |r| &r.id);
    Ok(dto::Page::of(rows.into_iter().map(views::audit).collect(), next_cursor))
}
