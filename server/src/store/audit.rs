//! The audit log's rows.

use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder,
    QuerySelect,
};

use super::entities::audit::{self, Entity as Audit};
use super::page::PageRequest;

pub async fn insert(db: &impl ConnectionTrait, row: audit::Model) -> Result<(), DbErr> {
    Audit::insert(row.into_active_model().reset_all()).exec_without_returning(db).await.map(|_| ())
}

pub async fn list(db: &impl ConnectionTrait, page: &PageRequest) -> Result<Vec<audit::Model>, DbErr> {
    let mut query = Audit::find().order_by_desc(audit::Column::Id).limit(page.limit + 1);
    if let Some(before) = &page.before {
        query = query.filter(audit::Column::Id.lt(before.clone()));
    }
    query.all(db).await
}
