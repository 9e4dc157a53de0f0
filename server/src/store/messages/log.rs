//! The delivery log's reads: a filtered page of messages, and the counts by state.

use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use sea_orm::{DbBackend, Statement, Value};

use app::domain::states::MessageState;
use migrations::UNDELIVERED;

use crate::ids::{ID_AFTER_CREATION_MS, first_id_at};
use crate::store::entities::message::{self, Column, Entity as Messages};
use crate::store::page::PageRequest;
/// The delivery log's filters; `None` means any.
#[derive(Debug, Clone, Default)]
pub struct MessageFilter {
    /// Only these messages (an event's, found by its CloudEvent id).
    pub ids: Option<Vec<String>>,
    pub customer_id: Option<String>,
    pub subscription_id: Option<String>,
    pub state: Option<MessageState>,
    pub event_type: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
}

impl MessageFilter {
    pub(super) fn condition(&self) -> Condition {
        let mut cond = Condition::all();
        if let Some(ids) = &self.ids {
            cond = cond.add(Column::Id.is_in(ids.iter().map(String::as_str)));
        }
        if let Some(v) = &self.customer_id {
            cond = cond.add(Column::CustomerId.eq(v.as_str()));
        }
        if let Some(v) = &self.subscription_id {
            cond = cond.add(Column::SubscriptionId.eq(v.as_str()));
        }
        if let Some(v) = self.state {
            cond = cond.add(Column::State.eq(v.as_str()));
            if v != MessageState::Delivered {
                // Said literally, so that both databases read the log by state, which holds only these.
                cond = cond.add(Expr::cust(UNDELIVERED));
            }
        }
        if let Some(v) = &self.event_type {
            cond = cond.add(Column::EventType.eq(v.as_str()));
        }
        if let Some(v) = self.since_ms {
            cond = cond.add(Column::CreatedAt.gte(v));
        }
        if let Some(v) = self.until_ms {
            // The id bound lets the log's indexes, all ordered by id, start at the window's end
            // rather than walk down to it from the newest message.
            cond = cond.add(Column::Id.lt(first_id_at("msg", v + ID_AFTER_CREATION_MS))).add(Column::CreatedAt.lt(v));
        }
        cond
    }
}

/// Newest first; fetches one row more than the page to know whether another follows.
pub async fn list(
    db: &impl ConnectionTrait,
    filter: &MessageFilter,
    page: &PageRequest,
) -> Result<Vec<message::Model>, DbErr> {
    let mut query = Messages::find().filter(filter.condition()).order_by_desc(Column::Id).limit(page.limit + 1);
    if let Some(before) = &page.before {
        query = query.filter(Column::Id.lt(before.clone()));
    }
    query.all(db).await
}

/// How many messages are in each state: (state, count). The messages not
/// delivered by state in one statement, from the log by state that holds only
/// them; the delivered ones as all the rest, every message of the customer (or
/// every message) counted [`COUNT_CHUNK`] at a time. A message that moves
/// between the two reads is counted as it was at one of them.
pub async fn count_by_state(db: &impl ConnectionTrait, customer_id: Option<&str>) -> Result<Vec<(String, i64)>, DbErr> {
    let backend = db.get_database_backend();
    let parameter = if backend == DbBackend::Postgres { "$1" } else { "?1" };
    let (of_customer, values) = match customer_id {
        Some(id) => (format!("customer_id = {parameter}"), vec![Value::from(id)]),
        None => ("TRUE".to_string(), Vec::new()),
    };
    let sql = format!("SELECT state, count(*) AS n FROM messages WHERE {UNDELIVERED} AND {of_customer} GROUP BY state");
    let rows = db.query_all_raw(Statement::from_sql_and_values(backend, sql, values)).await?;
    let mut counts: Vec<(String, i64)> = rows
        .iter()
        .map(|row| Ok((row.try_get("", "state")?, row.try_get::<i64>("", "n")?)))
        .collect::<Result<_, DbErr>>()?;
    let undelivered: i64 = counts.iter().map(|(_, n)| n).sum();
    let all = count_in_chunks(db, customer_id, COUNT_CHUNK).await? as i64;
    counts.push((MessageState::Delivered.as_str().to_string(), (all - undelivered).max(0)));
    Ok(counts)
}

/// Messages counted by one statement of [`count_in_chunks`]: a few milliseconds from the cache,
/// under a hundred read from disk, so that no statement holds a connection (on SQLite the
/// engine's only one) near the pool's one-second deadline, whatever the size of the history.
pub const COUNT_CHUNK: u64 = 50_000;

/// Every message, or every message of one customer, counted along an index ordered by id
/// (the primary key, or the customer's) `chunk` entries per statement. The chunks are read
/// one after another, not in one snapshot: a message published meanwhile may or may not be
/// counted, as it would be a moment later.
pub async fn count_in_chunks(db: &impl ConnectionTrait, customer_id: Option<&str>, chunk: u64) -> Result<u64, DbErr> {
    let backend = db.get_database_backend();
    let sql = count_chunk_sql(backend, customer_id.is_some());
    // Ids are never empty, so every one sorts after "".
    let (mut total, mut after) = (0u64, String::new());
    loop {
        let mut values: Vec<Value> = customer_id.map(Value::from).into_iter().collect();
        values.extend([Value::from(after.clone()), Value::from(chunk as i64)]);
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

pub(super) fn count_chunk_sql(backend: DbBackend, of_customer: bool) -> String {
    let [first, second, third] = if backend == DbBackend::Postgres { ["$1", "$2", "$3"] } else { ["?"; 3] };
    let (customer, after, limit) = if of_customer {
        (format!("customer_id = {first} AND "), second, third)
    } else {
        (String::new(), first, second)
    };
    format!(
        "SELECT count(*) AS n, max(id) AS last FROM \
         (SELECT id FROM messages WHERE {customer}id > {after} ORDER BY id LIMIT {limit}) AS chunk"
    )
}
