//! The end of attempts: each message moved to its next state under the lease it
//! was sent with, and the attempt rows inserted with them.

use domain::ids::MessageId;
use std::sync::LazyLock;

use foldhash::{HashSet, HashSetExt};
use sea_orm::{ConnectionTrait, DbErr, IdenStatic, Iterable, TransactionTrait};
use sea_orm::{DatabaseConnection, DbBackend, Statement, Value};

use domain::states::{MessageState, Outcome};

use crate::store::counts::{self, Attempted};
use crate::store::entities::attempt;
use crate::store::placeholder;
use crate::store::recordset::{self, Arrays, Type, col, nullable};
use crate::store::sqlite_direct::Direct;
/// The end of one attempt, as the message should record it.
#[derive(Debug, Clone)]
pub struct Finish {
    pub state: MessageState,
    pub dead_reason: Option<&'static str>,
    pub next_attempt_at: Option<i64>,
    pub delivered_at: Option<i64>,
    pub last_status: Option<i32>,
    /// When the series of attempts first failed (kept by a release without an attempt).
    pub first_failed_at: Option<i64>,
}

/// One attempt's end for [`finish_many`]: the message, the lease it was sent under, its next state.
pub struct End {
    pub id: MessageId,
    pub lease_token: i64,
    pub finish: Finish,
}

/// Records many attempts' ends in one statement per chunk: each message moves
/// to its next state if it still holds the lease it was sent under. Returns
/// the ids that moved; the others' leases were lost and they are unchanged.
pub async fn finish_many(db: &impl ConnectionTrait, ends: &[End], now_ms: i64) -> Result<HashSet<MessageId>, DbErr> {
    let mut moved = HashSet::with_capacity(ends.len());
    for statement in finish_statements(db.get_database_backend(), ends, now_ms) {
        for row in db.query_all_raw(statement).await? {
            moved.insert(row.try_get::<MessageId>("", "id")?);
        }
    }
    Ok(moved)
}

/// The statements of [`finish_many`], each returning the ids it moved.
fn finish_statements(backend: DbBackend, ends: &[End], now_ms: i64) -> Vec<Statement> {
    let chunks = ends.chunks(FINISH_CHUNK);
    chunks
        .map(|chunk| {
            // SQLite numbers `?` by position, so the values follow the text's order: `now` first.
            let mut values: Vec<Value> = vec![now_ms.into()];
            let now = placeholder(backend, 1);
            let mut rows = Vec::with_capacity(chunk.len());
            for end in chunk {
                let f = &end.finish;
                let first = values.len();
                values.extend([
                    end.id.clone().into(),
                    end.lease_token.into(),
                    f.state.as_str().into(),
                    f.dead_reason.map(str::to_string).into(),
                    f.next_attempt_at.into(),
                    f.delivered_at.into(),
                    f.last_status.into(),
                    f.first_failed_at.into(),
                ]);
                let marks: Vec<String> = (first + 1..=values.len()).map(|n| placeholder(backend, n)).collect();
                rows.push(format!("({})", marks.join(", ")));
            }
            // VALUES names its columns column1, column2, … on both SQLite and PostgreSQL.
            let sql = format!(
                "UPDATE messages SET state = v.column3, dead_reason = v.column4, next_attempt_at = v.column5, \
                 delivered_at = v.column6, last_status = v.column7, first_failed_at = v.column8, \
                 attempt_count = attempt_count + 1, \
                 lease_token = NULL, updated_at = {now} \
                 FROM (VALUES {}) AS v \
                 WHERE messages.id = v.column1 AND messages.lease_token = v.column2 AND messages.state = 'delivering' \
                 RETURNING messages.id",
                rows.join(", ")
            );
            Statement::from_sql_and_values(backend, sql, values)
        })
        .collect()
}

/// [`finish_recording`] in a transaction on SQLite's writer connection.
pub fn finish_recording_direct(
    txn: &Direct,
    ends: &[End],
    attempts: Vec<attempt::Model>,
    now_ms: i64,
    writer: i64,
) -> Result<HashSet<MessageId>, DbErr> {
    let mut moved = HashSet::with_capacity(ends.len());
    for statement in finish_statements(DbBackend::Sqlite, ends, now_ms) {
        moved.extend(txn.texts::<MessageId>(&statement)?);
    }
    txn.execute_all(&recorded_statements(&moved, attempts, writer))?;
    Ok(moved)
}

/// On SQLite, the statements that follow the messages' move: the attempt rows of the messages
/// that `moved`, counted in their customers' minutes in the rows of `writer`, and inserted.
fn recorded_statements(moved: &HashSet<MessageId>, attempts: Vec<attempt::Model>, writer: i64) -> Vec<Statement> {
    let recorded: Vec<attempt::Model> = attempts.into_iter().filter(|a| moved.contains(&a.message_id)).collect();
    let counted = recorded.iter().map(|a| Attempted {
        customer_id: &a.customer_id,
        started_at: a.started_at,
        succeeded: a.outcome == Outcome::Success,
    });
    let mut statements = counts::attempt_statements(DbBackend::Sqlite, writer, counted);
    statements.extend(crate::store::bulk::insert_statements(DbBackend::Sqlite, &recorded));
    statements
}

/// Records attempts' ends with their attempt rows, `attempts[i]` the attempt
/// that ended as `ends[i]`: each message moves as in [`finish_many`], the
/// attempt rows of the messages that moved are inserted (an attempt whose
/// lease was lost is not recorded), and counted in their customers' minutes in
/// the rows of `writer` (see [`counts::add_attempts`]). Returns the ids that
/// moved. On PostgreSQL one statement does all three, its text the same for
/// every batch; `db` must be a transaction there.
pub async fn finish_recording(
    db: &impl ConnectionTrait,
    ends: &[End],
    attempts: Vec<attempt::Model>,
    now_ms: i64,
    writer: i64,
) -> Result<HashSet<MessageId>, DbErr> {
    if db.get_database_backend() != DbBackend::Postgres {
        let moved = finish_many(db, ends, now_ms).await?;
        crate::store::execute_all(db, recorded_statements(&moved, attempts, writer)).await?;
        return Ok(moved);
    }
    // `db` is the recorder's transaction.
    db.execute_unprepared(crate::store::PLAN_ONCE_BY_KEY).await?;
    let mut values = recording_arrays(ends, &attempts);
    values.push(now_ms.into());
    values.push(writer.into());
    let statement = Statement::from_sql_and_values(DbBackend::Postgres, FINISH_RECORDING.as_str(), values);
    db.query_all_raw(statement).await?.iter().map(|row| row.try_get::<MessageId>("", "id")).collect()
}

/// The ends and their attempts as the arrays of [`RECORDING_COLUMNS`].
fn recording_arrays(ends: &[End], attempts: &[attempt::Model]) -> Vec<Value> {
    assert_eq!(ends.len(), attempts.len(), "an attempt for every end");
    let mut arrays = Arrays::new(RECORDING_COLUMNS, ends.len());
    for (end, a) in ends.iter().zip(attempts) {
        debug_assert_eq!(end.id, a.message_id, "the attempt of this end");
        let f = &end.finish;
        arrays.push("id", end.id.as_str().into());
        arrays.push("lease_token", end.lease_token.into());
        arrays.push("state", f.state.as_str().into());
        arrays.push("dead_reason", f.dead_reason.into());
        arrays.push("next_attempt_at", f.next_attempt_at.into());
        arrays.push("delivered_at", f.delivered_at.into());
        arrays.push("last_status", f.last_status.into());
        arrays.push("first_failed_at", f.first_failed_at.into());
        arrays.push("started_at", a.started_at.into());
        arrays.push("duration_ms", a.duration_ms.into());
        arrays.push("status_code", a.status_code.into());
        arrays.push("error_kind", a.error_kind.map(|kind| kind.as_str()).into());
        arrays.push("error_detail", a.error_detail.as_deref().into());
        arrays.push("outcome", a.outcome.as_str().into());
        arrays.push("request_headers", a.request_headers.as_str().into());
        arrays.push("response_headers", a.response_headers.as_str().into());
        arrays.push("response_body", a.response_body.as_deref().into());
        arrays.push("trace_id", a.trace_id.as_deref().into());
    }
    arrays.into_values()
}

/// An attempt's end and its attempt row, as the batch of [`finish_recording`]
/// carries them. The row's message, customer and number come from the message
/// as it moves.
const RECORDING_COLUMNS: recordset::Columns = &[
    col("id", Type::Text),
    col("lease_token", Type::Int8),
    col("state", Type::Text),
    nullable("dead_reason", Type::Text),
    nullable("next_attempt_at", Type::Int8),
    nullable("delivered_at", Type::Int8),
    nullable("last_status", Type::Int4),
    nullable("first_failed_at", Type::Int8),
    col("started_at", Type::Int8),
    col("duration_ms", Type::Int8),
    nullable("status_code", Type::Int4),
    nullable("error_kind", Type::Text),
    nullable("error_detail", Type::Text),
    col("outcome", Type::Text),
    col("request_headers", Type::Text),
    col("response_headers", Type::Text),
    nullable("response_body", Type::Text),
    nullable("trace_id", Type::Text),
];

/// The parameters: the batch's columns, then the time and the writer. The
/// update hands each moved message's attempt row to the insert (RETURNING), so
/// that no join pairs them again, and to the count of its minute. A message holds a lease token only while delivering
/// (every way out clears it, every claim draws a new one), so the token alone
/// guards the update: saying the state too would offer the plan an index on
/// it, which a plan made on an empty table takes instead of the primary key.
static FINISH_RECORDING: LazyLock<String> = LazyLock::new(|| {
    let attempts = attempt::Column::iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ");
    let now = recordset::parameters(RECORDING_COLUMNS) + 1;
    let writer = now + 1;
    let success = Outcome::Success.as_str();
    format!(
        "WITH moved AS ( \
           UPDATE messages SET state = r.state, dead_reason = r.dead_reason, next_attempt_at = r.next_attempt_at, \
             delivered_at = r.delivered_at, last_status = r.last_status, first_failed_at = r.first_failed_at, \
             attempt_count = attempt_count + 1, \
             lease_token = NULL, updated_at = ${now} \
           FROM {} \
           WHERE messages.id = r.id AND messages.lease_token = r.lease_token \
           RETURNING messages.id AS message_id, messages.customer_id, \
             messages.attempt_count AS number, r.started_at, r.duration_ms, r.status_code, r.error_kind, \
             r.error_detail, r.outcome, r.request_headers, r.response_headers, r.response_body, r.trace_id \
         ), recorded AS ( \
           INSERT INTO attempts ({attempts}) SELECT {attempts} FROM moved \
         ), counted AS ( \
           INSERT INTO attempt_counts (customer_id, minute, writer, succeeded, failed) \
           SELECT customer_id, started_at / 60000, ${writer}::int8, \
             count(*) FILTER (WHERE outcome = '{success}'), count(*) FILTER (WHERE outcome <> '{success}') \
           FROM moved GROUP BY 1, 2 ORDER BY 1, 2 {add} \
         ) SELECT message_id AS id FROM moved",
        recordset::rows(RECORDING_COLUMNS, 1, "r"),
        add = counts::ADD_TO_ATTEMPT_COUNT,
    )
});

/// How PostgreSQL plans the statement of [`finish_recording`] in the
/// recorder's transaction: the plan's lines, and whether it is the one plan
/// kept for every batch (generic) rather than made for this one.
pub async fn recording_plan(db: &DatabaseConnection) -> Result<(Vec<String>, bool), DbErr> {
    let txn = db.begin().await?;
    txn.execute_unprepared(crate::store::PLAN_ONCE_BY_KEY).await?;
    txn.execute_unprepared(&format!("PREPARE herald_recording AS {}", FINISH_RECORDING.as_str())).await?;
    let parameters = recordset::parameters(RECORDING_COLUMNS) + 2;
    let explain = format!("EXPLAIN EXECUTE herald_recording({})", vec!["NULL"; parameters].join(", "));
    let plan = txn.query_all_raw(Statement::from_string(DbBackend::Postgres, explain)).await?;
    let plan = plan.iter().map(|row| row.try_get::<String>("", "QUERY PLAN")).collect::<Result<Vec<_>, _>>()?;
    let counts = "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'herald_recording'";
    let counts = txn.query_one_raw(Statement::from_string(DbBackend::Postgres, counts)).await?;
    let counts = counts.ok_or_else(|| DbErr::RecordNotFound("herald_recording".into()))?;
    let generic = counts.try_get::<i64>("", "generic_plans")? > 0 && counts.try_get::<i64>("", "custom_plans")? == 0;
    txn.execute_unprepared("DEALLOCATE herald_recording").await?;
    txn.rollback().await?;
    Ok((plan, generic))
}

/// Attempts per statement: 7 bound values each, well under SQLite's limit.
const FINISH_CHUNK: usize = 500;
