//! Customers.

use domain::ids::CustomerId;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder,
    QuerySelect,
};

use super::entities::customer::{self, Entity as Customers};
use super::page::PageRequest;

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
    let mut query = Customers::find().order_by_desc(customer::Column::Id).limit(page.limit + 1);
    if let Some(before) = &page.before {
        query = query.filter(customer::Column::Id.lt(before.clone()));
    }
    query.all(db).await
}
