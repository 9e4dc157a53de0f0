//! Counts kept beside the rows they count (migration m0015): each customer's
//! messages kept, and each customer's attempts per minute. Each count changes
//! in the transaction that changes its rows, so it can neither lead nor lag
//! them, through a crash included; the overview and the gauges read a few of
//! these rows where they would otherwise count the history.

use std::collections::BTreeMap;

use domain::ids::CustomerId;
use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement, Value};

use super::placeholder;

pub use migrations::ATTEMPT_MINUTES_KEPT;

/// Counts changed per statement.
const ROWS_PER_STATEMENT: usize = 500;

/// How `message_counts` takes a change: added to the customer's count (the
/// first of a customer's makes its row). Shared by the publish's single statement.
pub const ADD_TO_MESSAGE_COUNT: &str = "ON CONFLICT (customer_id) DO UPDATE \
     SET messages = message_counts.messages + excluded.messages";

/// Adds `change` (negative to take away) to the count of each customer's messages.
/// The customers' rows are written in key order, so that transactions that change
/// several wait for one another in one direction, never crosswise.
pub async fn change_messages(db: &impl ConnectionTrait, change: &BTreeMap<&str, i64>) -> Result<(), DbErr> {
    super::execute_all(db, message_statements(db.get_database_backend(), change)).await
}

/// The statements of [`change_messages`].
pub fn message_statements(backend: DbBackend, change: &BTreeMap<&str, i64>) -> Vec<Statement> {
    let entries: Vec<_> = change.iter().filter(|(_, n)| **n != 0).collect();
    let chunks = entries.chunks(ROWS_PER_STATEMENT);
    chunks
        .map(|chunk| {
            let mut values = Vec::with_capacity(chunk.len() * 2);
            for (customer, n) in chunk {
                values.extend([Value::from(**customer), Value::from(**n)]);
            }
            let sql = format!(
                "INSERT INTO message_counts (customer_id, messages) VALUES {} {ADD_TO_MESSAGE_COUNT}",
                rows(backend, chunk.len(), 2)
            );
            Statement::from_sql_and_values(backend, sql, values)
        })
        .collect()
}

/// The messages of each customer among `customers` (one entry per message).
pub fn per_customer<'a>(customers: impl IntoIterator<Item = &'a str>, sign: i64) -> BTreeMap<&'a str, i64> {
    let mut change = BTreeMap::new();
    for customer in customers {
        *change.entry(customer).or_insert(0) += sign;
    }
    change
}

/// The messages kept of one customer, or of every customer.
pub async fn messages_kept(db: &impl ConnectionTrait, customer_id: Option<&CustomerId>) -> Result<u64, DbErr> {
    let backend = db.get_database_backend();
    let (of_customer, values) = match customer_id {
        Some(id) => (format!(" WHERE customer_id = {}", placeholder(backend, 1)), vec![Value::from(id.as_str())]),
        None => (String::new(), Vec::new()),
    };
    // PostgreSQL's sum of BIGINTs is a NUMERIC.
    let sql = format!("SELECT CAST(COALESCE(sum(messages), 0) AS BIGINT) AS n FROM message_counts{of_customer}");
    let row = db.query_one_raw(Statement::from_sql_and_values(backend, sql, values)).await?;
    Ok(row.map(|row| row.try_get::<i64>("", "n")).transpose()?.unwrap_or(0).max(0) as u64)
}

/// One attempt, as the count of its minute takes it.
pub struct Attempted<'a> {
    pub customer_id: &'a str,
    pub started_at: i64,
    pub succeeded: bool,
}

/// How `attempt_counts` takes a minute's attempts: added to the writer's row (the
/// first of the minute makes it). Shared by the recorder's single statement.
pub const ADD_TO_ATTEMPT_COUNT: &str = "ON CONFLICT (customer_id, minute, writer) DO UPDATE SET \
     succeeded = attempt_counts.succeeded + excluded.succeeded, failed = attempt_counts.failed + excluded.failed";

/// Adds attempts to their customers' minutes, in the rows of `writer`: each
/// recorder has its own rows, so that none waits for another's row until it
/// commits. Rows are written in key order.
pub async fn add_attempts<'a>(
    db: &impl ConnectionTrait,
    writer: i64,
    attempts: impl IntoIterator<Item = Attempted<'a>>,
) -> Result<(), DbErr> {
    super::execute_all(db, attempt_statements(db.get_database_backend(), writer, attempts)).await
}

/// The statements of [`add_attempts`].
pub fn attempt_statements<'a>(
    backend: DbBackend,
    writer: i64,
    attempts: impl IntoIterator<Item = Attempted<'a>>,
) -> Vec<Statement> {
    let mut minutes: BTreeMap<(&str, i64), (i64, i64)> = BTreeMap::new();
    for a in attempts {
        let (succeeded, failed) = minutes.entry((a.customer_id, a.started_at.div_euclid(60_000))).or_default();
        *if a.succeeded { succeeded } else { failed } += 1;
    }
    let entries: Vec<_> = minutes.into_iter().collect();
    let chunks = entries.chunks(ROWS_PER_STATEMENT);
    chunks
        .map(|chunk| {
            let mut values = Vec::with_capacity(chunk.len() * 5);
            for ((customer, minute), (succeeded, failed)) in chunk {
                values.extend([
                    Value::from(*customer),
                    Value::from(*minute),
                    Value::from(writer),
                    Value::from(*succeeded),
                    Value::from(*failed),
                ]);
            }
            let sql = format!(
                "INSERT INTO attempt_counts (customer_id, minute, writer, succeeded, failed) VALUES {} \
                 {ADD_TO_ATTEMPT_COUNT}",
                rows(backend, chunk.len(), 5)
            );
            Statement::from_sql_and_values(backend, sql, values)
        })
        .collect()
}

/// The attempts of one customer, or of every customer, in each minute from
/// `since_minute` on (unix milliseconds / 60 000) that had any: (minute, succeeded, failed).
pub async fn attempts_per_minute(
    db: &impl ConnectionTrait,
    customer_id: Option<&CustomerId>,
    since_minute: i64,
) -> Result<Vec<(i64, u64, u64)>, DbErr> {
    let backend = db.get_database_backend();
    let mut values = vec![Value::from(since_minute)];
    let of_customer = match customer_id {
        Some(id) => {
            values.push(Value::from(id.as_str()));
            format!(" AND customer_id = {}", placeholder(backend, 2))
        }
        None => String::new(),
    };
    let sql = format!(
        "SELECT minute, CAST(sum(succeeded) AS BIGINT) AS succeeded, CAST(sum(failed) AS BIGINT) AS failed \
         FROM attempt_counts WHERE minute >= {}{of_customer} GROUP BY minute",
        placeholder(backend, 1)
    );
    let rows = db.query_all_raw(Statement::from_sql_and_values(backend, sql, values)).await?;
    rows.iter()
        .map(|row| {
            let count = |column| row.try_get::<i64>("", column).map(|n| n.max(0) as u64);
            Ok((row.try_get::<i64>("", "minute")?, count("succeeded")?, count("failed")?))
        })
        .collect()
}

/// Forgets the minutes before `minute`; returns how many rows went.
pub async fn forget_minutes_before(db: &impl ConnectionTrait, minute: i64) -> Result<u64, DbErr> {
    let backend = db.get_database_backend();
    let sql = format!("DELETE FROM attempt_counts WHERE minute < {}", placeholder(backend, 1));
    Ok(db.execute_raw(Statement::from_sql_and_values(backend, sql, [Value::from(minute)])).await?.rows_affected())
}

/// `(?, ?), (?, ?)`: `rows` rows of `width` placeholders; PostgreSQL's numbered from `$1`.
fn rows(backend: DbBackend, rows: usize, width: usize) -> String {
    (0..rows)
        .map(|r| {
            let marks: Vec<String> = (1..=width).map(|c| placeholder(backend, r * width + c)).collect();
            format!("({})", marks.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}
