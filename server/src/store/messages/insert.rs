//! New message rows: the publish's, the replays', the operational events' and the test event's.

use domain::ids::{EndpointId, SubscriptionId};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement};

use domain::states::{MessageState, SubscriptionStatus};

use crate::ids;
use crate::store::counts;
use crate::store::entities::{event, message, subscription};
use crate::store::recordset::{self, Type, col, nullable};
use crate::store::sqlite_direct::Direct;

/// Inserts the messages and adds them to their customers' counts (`db` a
/// transaction, or a count could miss its messages).
pub async fn insert_many(db: &impl ConnectionTrait, rows: &[message::Model]) -> Result<(), DbErr> {
    crate::store::execute_all(db, insert_statements(db.get_database_backend(), rows)).await
}

/// [`insert_many`] in a transaction on SQLite's writer connection.
pub fn insert_many_direct(txn: &Direct, rows: &[message::Model]) -> Result<(), DbErr> {
    txn.execute_all(&insert_statements(DbBackend::Sqlite, rows))
}

fn insert_statements(backend: DbBackend, rows: &[message::Model]) -> Vec<Statement> {
    let mut statements = crate::store::bulk::insert_statements(backend, rows);
    let counted = counts::per_customer(rows.iter().map(|m| m.customer_id.as_str()), 1);
    statements.extend(counts::message_statements(backend, &counted));
    statements
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
/// The `next_attempt_at` of a message held because its subscription is
/// paused: open, so never removed, yet never due, never expired and never
/// released by its endpoint; its TTL starts when the subscription resumes.
pub const PAUSED: i64 = i64::MAX;

/// A new message of `event` for `sub`: pending, or held while the subscription is paused.
pub fn message_for(event: &event::Model, sub: &subscription::Model, ttl_ms: i64, now: i64) -> message::Model {
    let mut msg = pending_message(event, sub.id.clone(), sub.endpoint_id.clone(), now);
    msg.expires_at = now + ttl_ms;
    if sub.status == SubscriptionStatus::Paused {
        msg.state = MessageState::Held;
        msg.next_attempt_at = Some(PAUSED);
    }
    msg
}

pub fn pending_message(
    event: &event::Model,
    subscription_id: SubscriptionId,
    endpoint_id: EndpointId,
    now: i64,
) -> message::Model {
    message::Model {
        id: ids::new(),
        customer_id: event.customer_id.clone(),
        event_id: event.id.clone(),
        subscription_id,
        endpoint_id,
        event_type: event.event_type.clone(),
        state: MessageState::Pending,
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
