//! Customer portal links: stored by their token's hash, opened once.

use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter};

use super::entities::portal_link::{self, Column, Entity as Links};

/// How long a link is kept after it expired, so that its row can still be read.
pub const KEPT_AFTER_EXPIRY_MS: i64 = 86_400_000;

pub async fn insert(db: &impl ConnectionTrait, row: portal_link::Model) -> Result<(), DbErr> {
    Links::insert(row.into_active_model()).exec_without_returning(db).await.map(|_| ())
}

/// Marks the link with this token hash used, if it is unused and unexpired at `now`, and
/// returns it. One statement decides, so two requests with the same token cannot both open it.
pub async fn open(db: &impl ConnectionTrait, token_hash: &str, now: i64) -> Result<Option<portal_link::Model>, DbErr> {
    let Some(link) = Links::find().filter(Column::TokenHash.eq(token_hash)).one(db).await? else {
        return Ok(None);
    };
    let opened = Links::update_many()
        .col_expr(Column::UsedAt, Expr::value(now))
        .filter(Column::Id.eq(link.id.clone()))
        .filter(Column::UsedAt.is_null())
        .filter(Column::ExpiresAt.gt(now))
        .exec(db)
        .await?;
    Ok((opened.rows_affected == 1).then_some(portal_link::Model { used_at: Some(now), ..link }))
}

/// Removes links that expired before `expired_before`.
pub async fn remove_expired(db: &impl ConnectionTrait, expired_before: i64) -> Result<u64, DbErr> {
    Ok(Links::delete_many().filter(Column::ExpiresAt.lt(expired_before)).exec(db).await?.rows_affected)
}
