//! Attempts: a message's history.

use domain::ids::MessageId;
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder};

use super::entities::attempt::{self, Column, Entity as Attempts};

pub async fn for_message(db: &impl ConnectionTrait, message_id: &MessageId) -> Result<Vec<attempt::Model>, DbErr> {
    Attempts::find().filter(Column::MessageId.eq(message_id.clone())).order_by_asc(Column::Number).all(db).await
}
