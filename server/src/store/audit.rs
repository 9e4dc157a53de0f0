//! The audit log's rows: one per change, written in the change's transaction.

use domain::ids::CustomerId;
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter};

use super::entities::audit::{self, Column, Entity as Audit};
use super::page::{self, PageRequest};
use crate::ids;

/// The actor of the changes Herald makes by itself (an endpoint's circuit opening, say).
pub const SYSTEM: &str = "system";

/// A row, `detail` being JSON text (never a secret).
pub fn row(
    at: i64,
    actor: &str,
    action: &str,
    target: &str,
    customer_id: Option<&CustomerId>,
    detail: String,
) -> audit::Model {
    audit::Model {
        id: ids::new(),
        at,
        actor: actor.to_string(),
        action: action.to_string(),
        target: target.to_string(),
        detail,
        customer_id: customer_id.cloned(),
    }
}

pub async fn insert(db: &impl ConnectionTrait, row: audit::Model) -> Result<(), DbErr> {
    Audit::insert(row.into_active_model().reset_all()).exec_without_returning(db).await.map(|_| ())
}

/// What a read of the log keeps; every part is optional.
#[derive(Debug, Default)]
pub struct AuditFilter {
    pub customer_id: Option<CustomerId>,
    pub action: Option<String>,
    pub target: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
}

/// Newest first. The log holds changes, not deliveries, so it stays small; a
/// customer's rows are read by their own index.
pub async fn list(
    db: &impl ConnectionTrait,
    filter: &AuditFilter,
    page: &PageRequest,
) -> Result<Vec<audit::Model>, DbErr> {
    let mut query = Audit::find();
    if let Some(customer_id) = &filter.customer_id {
        query = query.filter(Column::CustomerId.eq(customer_id.clone()));
    }
    if let Some(action) = &filter.action {
        query = query.filter(Column::Action.eq(action.clone()));
    }
    if let Some(target) = &filter.target {
        query = query.filter(Column::Target.eq(target.clone()));
    }
    if let Some(since) = filter.since_ms {
        query = query.filter(Column::At.gte(since));
    }
    if let Some(until) = filter.until_ms {
        query = query.filter(Column::At.lt(until));
    }
    page::newest(db, query, Column::Id, page).await
}
