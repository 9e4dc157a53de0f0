//! What an endpoint's page reads of its recent attempts. Attempts carry no
//! endpoint, so each statement reads the customer's latest attempts since the
//! window's start through their index by customer and time
//! (`idx_attempts_customer_started`), at most [`SCANNED`] of them, and keeps
//! those whose message goes to the endpoint (a lookup by the message's key).
//! The bound is on the rows read, not the rows kept: a quiet endpoint of a busy
//! customer costs no more than a busy one, and no statement holds SQLite's one
//! connection for long (about 3 µs per attempt read; the figures are in
//! `docs/performance.md`). A message whose subscription moved to another URL
//! counts at its current endpoint.

use domain::health::{FailureKind, Tally};
use domain::ids::{CustomerId, EndpointId, MessageId};
use domain::states::{ErrorKind, Outcome};
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, Statement, TransactionTrait, Value,
};

use super::{PLAN_ONCE_BY_KEY, is_postgres};

/// The most of the customer's latest attempts one statement reads.
pub const SCANNED: u64 = 10_000;

/// The endpoint's attempts since `since_ms` (unix milliseconds).
#[derive(Debug, Clone, Copy)]
pub struct HealthWindow<'a> {
    pub customer_id: &'a CustomerId,
    pub endpoint_id: &'a EndpointId,
    pub since_ms: i64,
}

/// The customer's latest attempts of the window joined with their messages,
/// kept for the endpoint; its three values come first.
fn from(scanned: u64) -> String {
    format!(
        "FROM (SELECT message_id, number, started_at, duration_ms, outcome, status_code, error_kind FROM attempts \
               WHERE customer_id = ? AND started_at >= ? ORDER BY started_at DESC LIMIT {scanned}) a \
         JOIN messages m ON m.id = a.message_id WHERE m.endpoint_id = ?"
    )
}

/// A message that died with this attempt as the last of its current series
/// (a replay starts a new series at `attempt_base`), for a reason an attempt gives.
const DIED_OF_IT: &str = "m.state = 'dead' AND a.number = m.attempt_count AND m.attempt_count > m.attempt_base \
                          AND m.dead_reason <> 'subscription_deleted'";

impl HealthWindow<'_> {
    fn values(&self) -> Vec<Value> {
        vec![self.customer_id.as_str().into(), self.since_ms.into(), self.endpoint_id.as_str().into()]
    }
}

/// `sql` with its `?` numbered for PostgreSQL.
fn statement(backend: DbBackend, sql: &str, values: Vec<Value>) -> Statement {
    let sql = match backend {
        DbBackend::Postgres => {
            let mut n = 0;
            sql.split('?')
                .enumerate()
                .map(|(i, part)| {
                    if i == 0 {
                        part.to_string()
                    } else {
                        n += 1;
                        format!("${n}{part}")
                    }
                })
                .collect()
        }
        _ => sql.to_string(),
    };
    Statement::from_sql_and_values(backend, sql, values)
}

/// The condition that picks failed attempts of one kind, and its value.
fn kind_condition(kind: FailureKind) -> (&'static str, Value) {
    match kind {
        FailureKind::Error(error) => ("a.error_kind = ?", error.as_str().into()),
        FailureKind::Status(status) => ("a.error_kind IS NULL AND a.status_code = ?", i32::from(status).into()),
    }
}

/// A transaction for the page's reads. Each joins the attempts it read (a bounded number) to
/// their messages by key; on PostgreSQL, with statistics, the planner would rather hash a scan
/// of every message, which took 0.4 s at a million (docs/performance.md, "History").
pub async fn reads_by_key(db: &DatabaseConnection) -> Result<DatabaseTransaction, DbErr> {
    let txn = db.begin().await?;
    if is_postgres(db) {
        txn.execute_unprepared(PLAN_ONCE_BY_KEY).await?;
    }
    Ok(txn)
}

/// The window's attempts (of the customer's latest `scanned`) counted per hour and way of ending.
pub async fn tallies(db: &impl ConnectionTrait, w: HealthWindow<'_>, scanned: u64) -> Result<Vec<Tally>, DbErr> {
    let backend = db.get_database_backend();
    let rows = db.query_all_raw(statement(backend, &tallies_sql(scanned), w.values())).await?;
    rows.iter()
        .map(|row| {
            let outcome: Outcome = row.try_get("", "outcome")?;
            let status: Option<i32> = row.try_get("", "status_code")?;
            let error: Option<ErrorKind> = row.try_get("", "error_kind")?;
            let success = outcome == Outcome::Success;
            Ok(Tally {
                hour: row.try_get("", "hour")?,
                success,
                failure: if success {
                    None
                } else {
                    FailureKind::of(status.and_then(|s| u16::try_from(s).ok()), error)
                },
                count: row.try_get::<i64>("", "n")? as u64,
                dead_last: row.try_get::<i64>("", "dead_last")? as u64,
                latest_ms: row.try_get("", "latest")?,
                earliest_ms: row.try_get("", "earliest")?,
            })
        })
        .collect()
}

fn tallies_sql(scanned: u64) -> String {
    let from = from(scanned);
    format!(
        "SELECT a.started_at / 3600000 AS hour, a.outcome, a.status_code, a.error_kind, count(*) AS n, \
           CAST(sum(CASE WHEN {DIED_OF_IT} THEN 1 ELSE 0 END) AS BIGINT) AS dead_last, \
           max(a.started_at) AS latest, min(a.started_at) AS earliest \
         {from} GROUP BY 1, 2, 3, 4"
    )
}

/// Whether the window holds more of the customer's attempts than a statement
/// reads, and the oldest start among those it reads.
pub async fn coverage(
    db: &impl ConnectionTrait,
    w: HealthWindow<'_>,
    scanned: u64,
) -> Result<(bool, Option<i64>), DbErr> {
    let sql = format!(
        "SELECT count(*) AS n, min(started_at) AS oldest FROM (SELECT started_at FROM attempts \
           WHERE customer_id = ? AND started_at >= ? ORDER BY started_at DESC LIMIT {}) s",
        scanned + 1
    );
    let backend = db.get_database_backend();
    let values = vec![w.customer_id.as_str().into(), w.since_ms.into()];
    let row = db.query_one_raw(statement(backend, &sql, values)).await?;
    match row {
        Some(row) => Ok((row.try_get::<i64>("", "n")? as u64 > scanned, row.try_get("", "oldest")?)),
        None => Ok((false, None)),
    }
}

/// Milliseconds from each delivered message's publish (or replay, or resume)
/// to the end of its successful attempt, for the latest `limit` deliveries.
pub async fn times_to_deliver(db: &impl ConnectionTrait, w: HealthWindow<'_>, scanned: u64) -> Result<Vec<i64>, DbErr> {
    let success = Outcome::Success.as_str();
    let from = from(scanned);
    // An attempt before the message's current series (a delivered message
    // replayed since) is not a delivery of that series.
    let sql = format!(
        "SELECT a.started_at + a.duration_ms - m.ttl_started_at AS ms {from} \
           AND a.outcome = '{success}' AND a.started_at >= m.ttl_started_at"
    );
    let backend = db.get_database_backend();
    let rows = db.query_all_raw(statement(backend, &sql, w.values())).await?;
    rows.iter().map(|row| row.try_get("", "ms")).collect()
}

/// The latest failed attempt of a kind: its response body and message id.
pub async fn latest_failure(
    db: &impl ConnectionTrait,
    w: HealthWindow<'_>,
    kind: FailureKind,
    scanned: u64,
) -> Result<Option<(Option<String>, String)>, DbErr> {
    let (condition, value) = kind_condition(kind);
    let success = Outcome::Success.as_str();
    let from = from(scanned);
    // The body is read by the attempt's key, for the one attempt found.
    let sql = format!(
        "SELECT (SELECT b.response_body FROM attempts b WHERE b.message_id = a.message_id AND b.number = a.number) \
           AS response_body, a.message_id {from} AND a.outcome <> '{success}' AND {condition} \
         ORDER BY a.started_at DESC LIMIT 1"
    );
    let mut values = w.values();
    values.push(value);
    let backend = db.get_database_backend();
    let row = db.query_one_raw(statement(backend, &sql, values)).await?;
    row.map(|row| Ok((row.try_get("", "response_body")?, row.try_get("", "message_id")?))).transpose()
}

/// The dead messages whose last attempt, in the window, failed with `kind`.
pub async fn dead_of_kind(
    db: &impl ConnectionTrait,
    w: HealthWindow<'_>,
    kind: FailureKind,
    scanned: u64,
) -> Result<Vec<MessageId>, DbErr> {
    let (condition, value) = kind_condition(kind);
    let from = from(scanned);
    let sql = format!("SELECT m.id {from} AND {DIED_OF_IT} AND {condition}");
    let mut values = w.values();
    values.push(value);
    let backend = db.get_database_backend();
    let rows = db.query_all_raw(statement(backend, &sql, values)).await?;
    rows.iter().map(|row| row.try_get("", "id")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_gets_numbered_parameters() {
        let s = statement(DbBackend::Postgres, "a = ? AND b = ? AND c = ?", vec![1.into(), 2.into(), 3.into()]);
        assert_eq!(s.sql, "a = $1 AND b = $2 AND c = $3");
        let s = statement(DbBackend::Sqlite, "a = ?", vec![1.into()]);
        assert_eq!(s.sql, "a = ?");
    }

    /// The tallies read the customer's attempts by time, and each message by its key.
    #[tokio::test]
    async fn the_window_is_read_through_the_attempts_by_customer_and_time() {
        use crate::store::messages::plans::plan;
        let (customer_id, endpoint_id) = (CustomerId::from("cus_1"), EndpointId::from("ep_1"));
        let w = HealthWindow { customer_id: &customer_id, endpoint_id: &endpoint_id, since_ms: 0 };
        let plan = plan(statement(DbBackend::Sqlite, &tallies_sql(100), w.values())).await.join("\n");
        assert!(plan.contains("idx_attempts_customer_started (customer_id=? AND started_at>?)"), "{plan}");
        assert!(plan.contains("sqlite_autoindex_messages_1 (id=?)"), "{plan}");
        assert!(!plan.contains("SCAN attempts") && !plan.contains("SCAN m\n") && !plan.ends_with("SCAN m"), "{plan}");
    }

    /// Only the latest attempts are counted, the endpoint's and the customer's alone.
    #[tokio::test]
    async fn tallies_count_the_latest_attempts_of_the_endpoint() {
        use crate::store::entities::{attempt, message};
        let db = sea_orm::Database::connect("sqlite::memory:").await.unwrap();
        crate::store::migrate(&db).await.unwrap();
        let mut messages = Vec::new();
        let mut attempts = Vec::new();
        for (n, (customer, endpoint, status)) in [
            ("cus_1", "ep_1", 200),
            ("cus_1", "ep_1", 503),
            ("cus_1", "ep_1", 200),
            ("cus_1", "ep_2", 200),
            ("cus_2", "ep_1", 200),
        ]
        .into_iter()
        .enumerate()
        {
            let id = format!("msg_{n}");
            let mut m = message::Model::leased_sample(&id, endpoint);
            m.customer_id = customer.into();
            messages.push(m);
            attempts.push(attempt::Model {
                message_id: id.into(),
                customer_id: customer.into(),
                number: 1,
                started_at: 1_000 * (n as i64 + 1),
                duration_ms: 5,
                status_code: Some(status),
                error_kind: None,
                error_detail: None,
                outcome: if status == 200 { Outcome::Success } else { Outcome::Retryable },
                request_headers: "{}".into(),
                response_headers: "{}".into(),
                response_body: None,
                trace_id: None,
            });
        }
        crate::store::messages::insert_many(&db, &messages).await.unwrap();
        crate::store::bulk::insert(&db, &attempts).await.unwrap();
        let (customer_id, endpoint_id) = (CustomerId::from("cus_1"), EndpointId::from("ep_1"));
        let w = HealthWindow { customer_id: &customer_id, endpoint_id: &endpoint_id, since_ms: 0 };
        let all = tallies(&db, w, 100).await.unwrap();
        assert_eq!(all.iter().map(|t| t.count).sum::<u64>(), 3);
        assert_eq!(coverage(&db, w, 100).await.unwrap(), (false, Some(1_000)));
        // The customer's latest three attempts: one is another endpoint's, two are this one's.
        let latest = tallies(&db, w, 3).await.unwrap();
        assert_eq!(latest.iter().map(|t| t.count).sum::<u64>(), 2);
        assert_eq!(latest.iter().map(|t| t.earliest_ms).min(), Some(2_000), "the 503 and the next");
        assert_eq!(coverage(&db, w, 3).await.unwrap(), (true, Some(1_000)), "the window holds more than three");
        let since = HealthWindow { since_ms: 2_500, ..w };
        assert_eq!(tallies(&db, since, 100).await.unwrap().iter().map(|t| t.count).sum::<u64>(), 1);
    }
}
