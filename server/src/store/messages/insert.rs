//! New message rows: the publish's and the test event's.

use sea_orm::{ConnectionTrait, DbErr};

use app::domain::states::MessageState;

use crate::ids::new_id;
use crate::store::entities::{event, message};
use crate::store::recordset::{self, Type, col, nullable};

pub async fn insert_many(db: &impl ConnectionTrait, rows: Vec<message::Model>) -> Result<(), DbErr> {
    crate::store::bulk::insert(db, &rows).await
}

/// The columns of a message row, as a batch carries them (see [`super::recordset`]).
pub const COLUMNS: recordset::Columns = &[
    col("id", Type::Text),
    col("customer_id", Type::Text),
    col("event_id", Type::Text),
    col("subscription_id", Type::Text),
    col("endpoint_id", Type::Text),
    col("event_type", Type::Text),
    col("state", Type::Text),
    nullable("dead_reason", Type::Text),
    col("attempt_count", Type::Int4),
    col("attempt_base", Type::Int4),
    col("ttl_started_at", Type::Int8),
    col("expires_at", Type::Int8),
    nullable("next_attempt_at", Type::Int8),
    nullable("lease_token", Type::Int8),
    col("created_at", Type::Int8),
    col("updated_at", Type::Int8),
    nullable("delivered_at", Type::Int8),
    nullable("last_status", Type::Int4),
    nullable("first_failed_at", Type::Int8),
];

/// A new message of `event` for one subscription, due now.
pub fn pending_message(event: &event::Model, subscription_id: String, endpoint_id: String, now: i64) -> message::Model {
    message::Model {
        id: new_id("msg"),
        customer_id: event.customer_id.clone(),
        event_id: event.id.clone(),
        subscription_id,
        endpoint_id,
        event_type: event.event_type.clone(),
        state: MessageState::Pending.as_str().into(),
        dead_reason: None,
        attempt_count: 0,
        attempt_base: 0,
        ttl_started_at: now,
        expires_at: now,
        next_attempt_at: Some(now),
        lease_token: None,
        created_at: now,
        updated_at: now,
        delivered_at: None,
        last_status: None,
        first_failed_at: None,
    }
}
