//! Dashboard users.

use domain::ids::UserId;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, PaginatorTrait, QueryFilter,
    QueryOrder,
};

use super::entities::user::{self, Entity as Users};

pub async fn insert(db: &impl ConnectionTrait, row: user::Model) -> Result<(), DbErr> {
    Users::insert(row.into_active_model().reset_all()).exec_without_returning(db).await.map(|_| ())
}

pub async fn count(db: &impl ConnectionTrait) -> Result<u64, DbErr> {
    Users::find().count(db).await
}

pub async fn find_by_username(db: &impl ConnectionTrait, username: &str) -> Result<Option<user::Model>, DbErr> {
    Users::find().filter(user::Column::Username.eq(username)).one(db).await
}

pub async fn get(db: &impl ConnectionTrait, id: &UserId) -> Result<Option<user::Model>, DbErr> {
    Users::find_by_id(id.clone()).one(db).await
}

pub async fn list(db: &impl ConnectionTrait) -> Result<Vec<user::Model>, DbErr> {
    Users::find().order_by_asc(user::Column::Username).all(db).await
}
