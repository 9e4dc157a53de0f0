//! Retention's reads and deletes: ended messages with their attempts, and
//! events, once they have passed their time.
//!
//! Ids are ULIDs, which begin with their creation time, so the rows made
//! before a time are a range of the primary key: each query reads that range
//! from its start and needs no index of its own (none is added to the
//! tables every publish and delivery write).

use domain::ids::{CustomerId, EventId, MessageId};
use foldhash::{HashSet, HashSetExt};
use sea_orm::sea_query::{Expr, ExprTrait, Func, FunctionCall};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, TransactionTrait,
};

use super::counts;
use super::entities::attempt::{self, Entity as Attempts};
use super::entities::event::{self, Entity as Events};
use super::entities::message::{self, Entity as Messages};
use crate::ids::first_id_at;

/// Ended (delivered or dead) messages whose end came before `ended_before_ms`, oldest first.
fn ended_before(ended_before_ms: i64) -> sea_orm::Condition {
    sea_orm::Condition::all()
        .add(message::Column::Id.lt(first_id_at("msg", ended_before_ms)))
        .add(message::Column::NextAttemptAt.is_null())
        .add(Expr::expr(ended_at()).lt(ended_before_ms))
}

/// When a message ended: delivered, or last changed (to dead).
fn ended_at() -> FunctionCall {
    Func::coalesce([Expr::col(message::Column::DeliveredAt), Expr::col(message::Column::UpdatedAt)])
}

/// Up to `limit` ids of messages that ended before `ended_before_ms`.
pub async fn ended_messages(
    db: &impl ConnectionTrait,
    ended_before_ms: i64,
    limit: u64,
) -> Result<Vec<MessageId>, DbErr> {
    Messages::find()
        .select_only()
        .column(message::Column::Id)
        .filter(ended_before(ended_before_ms))
        .order_by_asc(message::Column::Id)
        .limit(limit)
        .into_tuple()
        .all(db)
        .await
}

/// Removes those of `ids` that are still ended before `ended_before_ms` (a
/// replay since their reading reopened the others), with their attempts, and
/// takes them from their customers' counts, in one transaction. Returns
/// (messages, attempts) removed.
pub async fn remove_messages(
    db: &DatabaseConnection,
    ids: Vec<MessageId>,
    ended_before_ms: i64,
) -> Result<(u64, u64), DbErr> {
    let txn = db.begin().await?;
    let removed: Vec<(MessageId, CustomerId)> = Messages::delete_many()
        .filter(message::Column::Id.is_in(ids))
        .filter(ended_before(ended_before_ms))
        .exec_with_returning(&txn)
        .await?
        .into_iter()
        .map(|m| (m.id, m.customer_id))
        .collect();
    let count = removed.len() as u64;
    let attempts = if removed.is_empty() {
        0
    } else {
        let ids = removed.iter().map(|(id, _)| id.clone());
        Attempts::delete_many().filter(attempt::Column::MessageId.is_in(ids)).exec(&txn).await?.rows_affected
    };
    // Last, so that a publish waits for this customer's count no longer than the commit.
    counts::change_messages(&txn, &counts::per_customer(removed.iter().map(|(_, c)| c.as_str()), -1)).await?;
    txn.commit().await?;
    Ok((count, attempts))
}

/// Up to `limit` events published before `published_before_ms` whose id follows
/// `after` (the sweep's cursor), oldest first, with the ids of their messages.
pub async fn old_events(
    db: &impl ConnectionTrait,
    published_before_ms: i64,
    after: Option<&EventId>,
    limit: u64,
) -> Result<Vec<(EventId, String)>, DbErr> {
    let mut query = Events::find()
        .select_only()
        .columns([event::Column::Id, event::Column::MessageIds])
        .filter(event::Column::Id.lt(first_id_at("evt", published_before_ms)))
        .filter(event::Column::CreatedAt.lt(published_before_ms))
        .order_by_asc(event::Column::Id)
        .limit(limit);
    if let Some(after) = after {
        query = query.filter(event::Column::Id.gt(after.clone()));
    }
    query.into_tuple().all(db).await
}

/// The events, among those of `message_ids`, that an open message still needs.
pub async fn needed_events(db: &impl ConnectionTrait, message_ids: Vec<MessageId>) -> Result<HashSet<EventId>, DbErr> {
    let mut needed = HashSet::new();
    for chunk in message_ids.chunks(500) {
        let open: Vec<EventId> = Messages::find()
            .select_only()
            .column(message::Column::EventId)
            .filter(message::Column::Id.is_in(chunk.iter().cloned()))
            .filter(message::Column::NextAttemptAt.is_not_null())
            .into_tuple()
            .all(db)
            .await?;
        needed.extend(open);
    }
    Ok(needed)
}

/// Removes these events; their `(source, id)` may be published again as new events.
pub async fn remove_events(db: &impl ConnectionTrait, ids: Vec<EventId>) -> Result<u64, DbErr> {
    if ids.is_empty() {
        return Ok(0);
    }
    Ok(Events::delete_many().filter(event::Column::Id.is_in(ids)).exec(db).await?.rows_affected)
}

/// Forgets the per-minute attempt counts older than they are kept
/// ([`counts::ATTEMPT_MINUTES_KEPT`] before `now_ms`); returns how many rows went.
pub async fn old_minutes(db: &impl ConnectionTrait, now_ms: i64) -> Result<u64, DbErr> {
    counts::forget_minutes_before(db, now_ms.div_euclid(60_000) - counts::ATTEMPT_MINUTES_KEPT).await
}

/// On a PostgreSQL server whose autovacuum is off, vacuums the tables that
/// retention removes rows from, so that their space is reused rather than
/// the files growing; true when it did. Nothing where autovacuum runs (it does
/// this by itself) or on SQLite (see [`give_back_free_pages`]).
pub async fn vacuum_unless_autovacuum(db: &DatabaseConnection) -> Result<bool, DbErr> {
    if !autovacuum_off(db).await? {
        return Ok(false);
    }
    // Not in a transaction: VACUUM refuses to run in one.
    db.execute_unprepared("VACUUM messages, attempts, events").await?;
    Ok(true)
}

/// Whether the database is PostgreSQL with autovacuum off: Herald then vacuums and analyzes itself.
pub async fn autovacuum_off(db: &impl ConnectionTrait) -> Result<bool, DbErr> {
    if db.get_database_backend() != DbBackend::Postgres {
        return Ok(false);
    }
    let setting =
        sea_orm::Statement::from_string(DbBackend::Postgres, "SELECT current_setting('autovacuum') AS setting");
    let on: Option<String> = db.query_one_raw(setting).await?.map(|row| row.try_get("", "setting")).transpose()?;
    Ok(on.as_deref() == Some("off"))
}

/// On SQLite, gives up to `pages` free pages back to the file system (the
/// database runs in incremental auto-vacuum, m0012); returns how many were
/// free before. Nothing on PostgreSQL, whose own vacuum reuses the space.
pub async fn give_back_free_pages(db: &impl ConnectionTrait, pages: u32) -> Result<u64, DbErr> {
    if db.get_database_backend() != DbBackend::Sqlite {
        return Ok(0);
    }
    let free = db
        .query_one_raw(sea_orm::Statement::from_string(DbBackend::Sqlite, "PRAGMA freelist_count"))
        .await?
        .map(|row| row.try_get_by_index::<i64>(0))
        .transpose()?
        .unwrap_or(0);
    if free > 0 {
        db.execute_unprepared(&format!("PRAGMA incremental_vacuum({pages})")).await?;
    }
    Ok(free as u64)
}
