//! API keys, found by the hash of their token.

use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter};

use super::entities::api_key::{self, Entity as ApiKeys};

pub async fn insert(db: &impl ConnectionTrait, row: api_key::Model) -> Result<(), DbErr> {
    ApiKeys::insert(row.into_active_model().reset_all()).exec_without_returning(db).await.map(|_| ())
}

pub async fn find_by_hash(db: &impl ConnectionTrait, token_hash: &str) -> Result<Option<api_key::Model>, DbErr> {
    ApiKeys::find().filter(api_key::Column::TokenHash.eq(token_hash)).one(db).await
}
