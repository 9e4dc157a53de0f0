//! Customers.

use domain::ids::CustomerId;
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter};

use super::entities::customer::{self, Entity as Customers};
use super::page::{self, PageRequest};

pub async fn insert(db: &impl ConnectionTrait, row: customer::Model) -> Result<(), DbErr> {
    Customers::insert(row.into_active_model().reset_all()).exec_without_returning(db).await.map(|_| ())
}

pub async fn get(db: &impl ConnectionTrait, id: &CustomerId) -> Result<Option<customer::Model>, DbErr> {
    Customers::find_by_id(id.clone()).one(db).await
}

pub async fn by_ids(db: &impl ConnectionTrait, ids: Vec<CustomerId>) -> Result<Vec<customer::Model>, DbErr> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Customers::find().filter(customer::Column::Id.is_in(ids)).all(db).await
}

pub async fn list(db: &impl ConnectionTrait, page: &PageRequest) -> Result<Vec<customer::Model>, DbErr> {
    page::newest(db, Customers::find(), customer::Column::Id, page).await
}

/// Marks the customer's routing as changed, so that every process reads it again before its next
/// publish (what the catalog's schemas check is part of it).
pub async fn bump_routing_version(db: &impl ConnectionTrait, id: &CustomerId) -> Result<(), DbErr> {
    use sea_orm::sea_query::{Alias, Expr, ExprTrait};
    let version = || Alias::new("routing_version");
    Customers::update_many()
        .col_expr(version(), Expr::col(version()).add(1))
        .filter(customer::Column::Id.eq(id.clone()))
        .exec(db)
        .await
        .map(drop)
}
