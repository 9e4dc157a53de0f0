//! What the operator's gauges read of the messages (see `pipeline::gauges`).
//! Each count reads an index that holds only what it counts, or the count kept
//! of every message, so its cost follows the backlog and the dead letters, not
//! the history.

use sea_orm::{ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, QuerySelect, Select};
use sea_orm::{Statement, Value};

use domain::states::MessageState;
use migrations::{FRESH_LANE, OPEN, RETRY_LANE, UNDELIVERED};

use super::claim::{Among, Lane, lane_due};
use crate::store::counts;
use crate::store::entities::message::{Column, Entity as Messages};

/// Messages by state. The open ones (pending, delivering, held) and the dead
/// ones in one statement (one snapshot): the open ones are exactly the entries
/// of the two lanes' partial indexes; the dead ones are the log's partial index
/// of undelivered messages, less the open ones. The delivered ones are every
/// message kept ([`counts::messages_kept`]) less the undelivered.
pub async fn by_state(db: &impl ConnectionTrait) -> Result<Vec<(MessageState, u64)>, DbErr> {
    let backend = db.get_database_backend();
    let sql = by_state_sql();
    let rows = db.query_all_raw(Statement::from_sql_and_values(backend, sql, Vec::<Value>::new())).await?;
    let mut counts: Vec<(MessageState, u64)> =
        [MessageState::Pending, MessageState::Delivering, MessageState::Held].into_iter().map(|s| (s, 0)).collect();
    let mut undelivered = 0u64;
    for row in rows {
        let state: String = row.try_get("", "state")?;
        let n = row.try_get::<i64>("", "n")?.max(0) as u64;
        match counts.iter_mut().find(|(s, _)| s.as_str() == state) {
            Some((_, count)) => *count += n,
            None if state == "undelivered" => undelivered = n,
            None => {}
        }
    }
    let open: u64 = counts.iter().map(|(_, n)| n).sum();
    counts.push((MessageState::Dead, undelivered.saturating_sub(open)));
    let all = counts::messages_kept(db, None).await?;
    counts.push((MessageState::Delivered, all.saturating_sub(undelivered)));
    Ok(counts)
}

pub(super) fn by_state_sql() -> String {
    format!(
        "SELECT state, count(*) AS n FROM messages WHERE {OPEN} AND {FRESH_LANE} GROUP BY state \
         UNION ALL SELECT state, count(*) AS n FROM messages WHERE {OPEN} AND {RETRY_LANE} GROUP BY state \
         UNION ALL SELECT 'undelivered', count(*) AS n FROM messages WHERE {UNDELIVERED}"
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
