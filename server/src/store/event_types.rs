//! The event-type catalog, one row per customer and type name.

use domain::ids::{CustomerId, EventTypeId};
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter, QuerySelect,
};

use super::entities::event_type::{self, Column, Entity as EventTypes};
use super::page::{self, PageRequest};

/// Inserts the type; `false` when the customer's catalog already has its name.
pub async fn insert(db: &impl ConnectionTrait, row: event_type::Model) -> Result<bool, DbErr> {
    let rows = EventTypes::insert(row.into_active_model())
        .on_conflict(OnConflict::columns([Column::CustomerId, Column::Name]).do_nothing().to_owned())
        .exec_without_returning(db)
        .await?;
    Ok(rows == 1)
}

pub async fn update(db: &impl ConnectionTrait, row: event_type::Model) -> Result<(), DbErr> {
    EventTypes::update(row.into_active_model().reset_all()).exec(db).await.map(|_| ())
}

pub async fn delete(db: &impl ConnectionTrait, id: &EventTypeId) -> Result<u64, DbErr> {
    Ok(EventTypes::delete_by_id(id.clone()).exec(db).await?.rows_affected)
}

pub async fn get(
    db: &impl ConnectionTrait,
    customer_id: &CustomerId,
    name: &str,
) -> Result<Option<event_type::Model>, DbErr> {
    named(customer_id, name).one(db).await
}

/// The type, locked until the transaction ends (PostgreSQL; SQLite's one writer needs no lock), so
/// that a change reads what it replaces.
pub async fn get_for_update(
    txn: &impl ConnectionTrait,
    customer_id: &CustomerId,
    name: &str,
) -> Result<Option<event_type::Model>, DbErr> {
    named(customer_id, name).lock_exclusive().one(txn).await
}

fn named(customer_id: &CustomerId, name: &str) -> sea_orm::Select<EventTypes> {
    EventTypes::find().filter(Column::CustomerId.eq(customer_id.clone())).filter(Column::Name.eq(name))
}

/// A page of the catalog, newest first; one customer's when `customer_id` is given.
pub async fn list(
    db: &impl ConnectionTrait,
    customer_id: Option<&CustomerId>,
    page: &PageRequest,
) -> Result<Vec<event_type::Model>, DbErr> {
    let mut query = EventTypes::find();
    if let Some(customer_id) = customer_id {
        query = query.filter(Column::CustomerId.eq(customer_id.clone()));
    }
    page::newest(db, query, Column::Id, page).await
}

/// The types with a schema of these customers: what publishing checks.
pub async fn with_schemas(
    db: &impl ConnectionTrait,
    customer_ids: &[CustomerId],
) -> Result<Vec<event_type::Model>, DbErr> {
    let mut found = Vec::new();
    // A few hundred customers per statement, within both databases' limits on bound values.
    for customers in customer_ids.chunks(500) {
        let rows = EventTypes::find()
            .filter(Column::CustomerId.is_in(customers.iter().map(CustomerId::as_str)))
            .filter(Column::Schema.is_not_null())
            .all(db)
            .await?;
        found.extend(rows);
    }
    Ok(found)
}
