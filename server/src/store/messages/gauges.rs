//! What the operator's gauges read of the messages (see `pipeline::gauges`).
//! Each count but one reads an index that holds only what it counts, so its
//! cost follows the backlog and the dead letters, not the history.

use sea_orm::{ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, QuerySelect, Select};
use sea_orm::{Statement, Value};

use app::domain::states::MessageState;
use migrations::{FRESH_LANE, OPEN, RETRY_LANE, UNDELIVERED};

use super::claim::{Among, Lane, lane_due};
use crate::store::entities::message::{Column, Entity as Messages};

/// Messages counted by one statement of [`count_all`]: a few milliseconds from the cache, under
/// a hundred read from disk, so that no statement holds a connection (on SQLite the engine's
/// only one) near the pool's one-second deadline, whatever the size of the history.
pub const COUNT_CHUNK: u64 = 50_000;

/// Open messages (pending, delivering, held) and dead ones by state in one
/// statement (one snapshot), and with `with_delivered` the delivered ones. The
/// open ones are exactly the entries of the two lanes' partial indexes; the dead
/// ones are the log's partial index of undelivered messages, less the open ones;
/// the delivered ones are every message ([`count_all`], the one count here that
/// grows with the history) less the undelivered.
pub async fn by_state(db: &impl ConnectionTrait, with_delivered: bool) -> Result<Vec<(MessageState, u64)>, DbErr> {
    let backend = db.get_database_backend();
    let sql = by_state_sql();
    let rows = db.query_all_raw(Statement::from_sql_and_values(backend, sql, Vec::<Value>::new())).await?;
    let mut counts: Vec<(MessageState, u64)> =
        [MessageState::Pending, MessageState::Delivering, MessageState::Held].into_iter().map(|s| (s, 0)).collect();
    let (mut undelivered, mut all) = (0u64, None);
    for row in rows {
        let state: String = row.try_get("", "state")?;
        let n = row.try_get::<i64>("", "n")?.max(0) as u64;
        match counts.iter_mut().find(|(s, _)| s.as_str() == state) {
            Some((_, count)) => *count += n,
            None if state == "undelivered" => undelivered = n,
            None => {}
        }
    }
    if with_delivered {
        all = Some(count_all(db, COUNT_CHUNK).await?);
    }
    let open: u64 = counts.iter().map(|(_, n)| n).sum();
    counts.push((MessageState::Dead, undelivered.saturating_sub(open)));
    if let Some(all) = all {
        counts.push((MessageState::Delivered, all.saturating_sub(undelivered)));
    }
    Ok(counts)
}

pub(super) fn by_state_sql() -> String {
    format!(
        "SELECT state, count(*) AS n FROM messages WHERE {OPEN} AND {FRESH_LANE} GROUP BY state \
         UNION ALL SELECT state, count(*) AS n FROM messages WHERE {OPEN} AND {RETRY_LANE} GROUP BY state \
         UNION ALL SELECT 'undelivered', count(*) AS n FROM messages WHERE {UNDELIVERED}"
    )
}

/// Every message, counted along the primary key `chunk` rows per statement. The chunks are
/// read one after another, not in one snapshot: a message published meanwhile may or may
/// not be counted, as it would be a moment later.
pub async fn count_all(db: &impl ConnectionTrait, chunk: u64) -> Result<u64, DbErr> {
    let backend = db.get_database_backend();
    let sql = count_chunk_sql(backend);
    // Ids are never empty, so every one sorts after "".
    let (mut total, mut after) = (0u64, String::new());
    loop {
        let values = vec![Value::from(after.clone()), Value::from(chunk as i64)];
        let row = db.query_one_raw(Statement::from_sql_and_values(backend, &sql, values)).await?;
        let Some(row) = row else { return Ok(total) };
        let n = row.try_get::<i64>("", "n")?.max(0) as u64;
        total += n;
        match row.try_get::<Option<String>>("", "last")? {
            Some(last) if n == chunk => after = last,
            _ => return Ok(total),
        }
    }
}

pub(super) fn count_chunk_sql(backend: DbBackend) -> String {
    let (after, limit) = if backend == DbBackend::Postgres { ("$1", "$2") } else { ("?", "?") };
    format!(
        "SELECT count(*) AS n, max(id) AS last FROM \
         (SELECT id FROM messages WHERE id > {after} ORDER BY id LIMIT {limit}) AS chunk"
    )
}

/// When the lane's oldest message that is due at `now_ms` became due: the
/// first entry of the lane's own index.
pub async fn oldest_due(db: &impl ConnectionTrait, lane: Lane, now_ms: i64) -> Result<Option<i64>, DbErr> {
    let due: Option<Option<i64>> =
        oldest_due_query(db.get_database_backend(), lane, now_ms).into_tuple().one(db).await?;
    Ok(due.flatten())
}

pub(super) fn oldest_due_query(backend: DbBackend, lane: Lane, now_ms: i64) -> Select<Messages> {
    Messages::find().select_only().column_as(Column::NextAttemptAt.min(), "due").filter(lane_due(
        backend,
        lane,
        now_ms,
        Among::AllBut(&[]),
    ))
}
