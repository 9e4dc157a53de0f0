//! API keys, found by the hash of their token.

use domain::ids::{ApiKeyId, CustomerId};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder,
};

use super::entities::api_key::{self, Entity as ApiKeys};

pub async fn insert(db: &impl ConnectionTrait, row: api_key::Model) -> Result<(), DbErr> {
    ApiKeys::insert(row.into_active_model().reset_all()).exec_without_returning(db).await.map(|_| ())
}

pub async fn find_by_hash(db: &impl ConnectionTrait, token_hash: &str) -> Result<Option<api_key::Model>, DbErr> {
    ApiKeys::find().filter(api_key::Column::TokenHash.eq(token_hash)).one(db).await
}

/// A customer's keys, newest first.
pub async fn of_customer(db: &impl ConnectionTrait, customer_id: &CustomerId) -> Result<Vec<api_key::Model>, DbErr> {
    ApiKeys::find()
        .filter(api_key::Column::CustomerId.eq(customer_id.clone()))
        .order_by_desc(api_key::Column::Id)
        .all(db)
        .await
}

/// Removes one of a customer's keys; returns it, or `None` if it has no such key.
pub async fn remove(
    db: &impl ConnectionTrait,
    customer_id: &CustomerId,
    key_id: &ApiKeyId,
) -> Result<Option<api_key::Model>, DbErr> {
    let Some(key) = ApiKeys::find_by_id(key_id.clone()).one(db).await? else { return Ok(None) };
    if key.customer_id != *customer_id {
        return Ok(None);
    }
    ApiKeys::delete_by_id(key_id.clone()).exec(db).await?;
    Ok(Some(key))
}
