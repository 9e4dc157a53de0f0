//! Messages: insertion, the delivery log's queries, and the worker's claim and
//! finish, every state change guarded by the state (and lease) it expects.

use std::sync::LazyLock;

use foldhash::{HashSet, HashSetExt};
use sea_orm::sea_query::{Expr, ExprTrait, LockBehavior, LockType, Query};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, IdenStatic, Iterable, QueryFilter, QueryOrder,
    QuerySelect, TransactionTrait,
};
use sea_orm::{DatabaseConnection, DbBackend, Statement, Value};

use app::domain::states::{EndpointState, MessageState};
use migrations::{FRESH_LANE, RETRY_LANE, UNDELIVERED, WAITING};

use super::entities::message::{self, Column, Entity as Messages};
use super::entities::{attempt, endpoint};
use super::page::PageRequest;
use super::recordset::{self, Arrays, Type, col, nullable};

pub async fn insert_many(db: &impl ConnectionTrait, rows: Vec<message::Model>) -> Result<(), DbErr> {
    super::bulk::insert(db, &rows).await
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
];

pub async fn get(db: &impl ConnectionTrait, id: &str) -> Result<Option<message::Model>, DbErr> {
    Messages::find_by_id(id.to_string()).one(db).await
}

/// The delivery log's filters; `None` means any.
#[derive(Debug, Clone, Default)]
pub struct MessageFilter {
    pub customer_id: Option<String>,
    pub subscription_id: Option<String>,
    pub state: Option<MessageState>,
    pub event_type: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
}

impl MessageFilter {
    fn condition(&self) -> Condition {
        let mut cond = Condition::all();
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
            cond = cond.add(Column::CreatedAt.lt(v));
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

/// Open messages: pending, delivering or held, the ones with a next attempt.
/// The worker's indexes hold only these; a query must say so to use them (a
/// comparison on `next_attempt_at` says it too).
fn open() -> Expr {
    Column::NextAttemptAt.is_not_null()
}

/// Open messages not leased: pending or held. An endpoint's index holds only
/// these; a query must say so to use it.
fn waiting() -> Condition {
    Condition::all().add(open()).add(Expr::cust(WAITING))
}

/// The two queues of the worker: first attempts, and everything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Fresh,
    Retry,
}

/// Which endpoints' messages a claim takes.
#[derive(Debug, Clone, Copy)]
pub enum Among<'a> {
    /// Any endpoint's but these (busy ones).
    AllBut(&'a [String]),
    /// This endpoint's only.
    Endpoint(&'a str),
}

/// Leases up to `limit` due messages of one lane in a single statement,
/// from the endpoints `among` names. While
/// `delivering`, `next_attempt_at` holds the lease's end: a message whose worker
/// died is due again then, in the retry lane, and its attempt count is untouched.
pub async fn claim(
    db: &DatabaseConnection,
    lane: Lane,
    now_ms: i64,
    limit: u64,
    lease_until_ms: i64,
    lease_token: i64,
    among: Among<'_>,
) -> Result<Vec<message::Model>, DbErr> {
    let lane_condition = lane_due(db.get_database_backend(), lane, now_ms, among);
    // Two statements in one transaction: PostgreSQL may run `id IN (SELECT … LIMIT
    // … FOR UPDATE SKIP LOCKED)` once per outer row, claiming more than the limit,
    // slowly. The rows picked stay locked (SKIP LOCKED for other claimers) until
    // the update commits.
    let txn = db.begin().await?;
    if db.get_database_backend() == DbBackend::Postgres {
        // A claim lost in a crash only makes its messages due again, as the end of their
        // lease would (an attempt recorded later flushes the claim with it): its commit
        // need not wait for the disk.
        txn.execute_unprepared(&format!("SET LOCAL synchronous_commit = off; {}", super::PLAN_EACH_TIME)).await?;
    }
    let picked: Vec<String> = pick(lane_condition, limit).all(&txn).await?;
    if picked.is_empty() {
        txn.commit().await?;
        return Ok(Vec::new());
    }
    let claimed = Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Delivering.as_str()))
        .col_expr(Column::NextAttemptAt, Expr::val(lease_until_ms))
        .col_expr(Column::LeaseToken, Expr::val(lease_token))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::Id.is_in(picked))
        .filter(not_leased(now_ms))
        .exec_with_returning(&txn)
        .await?;
    txn.commit().await?;
    Ok(claimed)
}

/// The lane's due messages of the endpoints `among` names.
fn lane_due(backend: DbBackend, lane: Lane, now_ms: i64, among: Among<'_>) -> Condition {
    // Each lane reads its own partial index, named by the same literal condition;
    // an endpoint's pending messages are among its waiting ones, said literally too.
    let due = Column::NextAttemptAt.lte(now_ms);
    let pending = Condition::all().add(Column::State.eq(MessageState::Pending.as_str())).add(Expr::cust(WAITING));
    let lane_condition = match lane {
        Lane::Fresh => Condition::all().add(pending).add(Expr::cust(FRESH_LANE)).add(due.clone()),
        // Retries, and the messages whose lease ended, first attempts or not.
        Lane::Retry => {
            let delivering = || Column::State.eq(MessageState::Delivering.as_str());
            Condition::any()
                .add(Condition::all().add(pending).add(Expr::cust(RETRY_LANE)).add(due.clone()))
                .add(Condition::all().add(delivering()).add(Expr::cust(RETRY_LANE)).add(due.clone()))
                .add(Condition::all().add(delivering()).add(Expr::cust(FRESH_LANE)).add(due.clone()))
        }
    };
    match among {
        // One endpoint's: its own index range, the other endpoints' messages unread.
        Among::Endpoint(endpoint_id) => Condition::all().add(lane_condition).add(Column::EndpointId.eq(endpoint_id)),
        Among::AllBut([]) => lane_condition,
        // Endpoints at their concurrency limit wait; their messages stay for later claims.
        // Passing over them reads past their due messages, which keeps other endpoints'
        // messages from waiting behind one slow endpoint's backlog. The list is one JSON
        // parameter, read once per claim, not once per row, and the same text for any length.
        Among::AllBut(busy) => {
            let busy = serde_json::to_string(busy).expect("strings serialize to JSON");
            let not_busy = match backend {
                DbBackend::Postgres => r#""messages"."endpoint_id" NOT IN (SELECT json_array_elements_text($1::json))"#,
                _ => r#""messages"."endpoint_id" NOT IN (SELECT value FROM json_each(?))"#,
            };
            Condition::all().add(lane_condition).add(Expr::cust_with_values(not_busy, [busy]))
        }
    }
}

/// The claim's guard on the rows it picked: none holds a live lease. The pick
/// ran in the same transaction and locked its rows (PostgreSQL), so they are
/// still due; the guard uses columns no index leads with, so the update finds
/// its rows by id (repeating the lane's condition made SQLite walk the lane's
/// whole due range instead, once per claim).
fn not_leased(now_ms: i64) -> Condition {
    Condition::any().add(Column::LeaseToken.is_null()).add(Column::NextAttemptAt.lte(now_ms))
}

/// The ids of the first `limit` messages due, locked (PostgreSQL) for the claim's update.
fn pick(lane_condition: Condition, limit: u64) -> sea_orm::Selector<sea_orm::SelectGetableTuple<String>> {
    Messages::find()
        .select_only()
        .column(Column::Id)
        .filter(lane_condition)
        .order_by_asc(Column::NextAttemptAt)
        .limit(limit)
        .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
        .into_tuple()
}

/// The end of one attempt, as the message should record it.
#[derive(Debug, Clone)]
pub struct Finish {
    pub state: MessageState,
    pub dead_reason: Option<&'static str>,
    pub next_attempt_at: Option<i64>,
    pub delivered_at: Option<i64>,
    pub last_status: Option<i32>,
}

/// One attempt's end for [`finish_many`]: the message, the lease it was sent under, its next state.
pub struct End {
    pub id: String,
    pub lease_token: i64,
    pub finish: Finish,
}

/// Records many attempts' ends in one statement per chunk: each message moves
/// to its next state if it still holds the lease it was sent under. Returns
/// the ids that moved; the others' leases were lost and they are unchanged.
pub async fn finish_many(db: &impl ConnectionTrait, ends: &[End], now_ms: i64) -> Result<HashSet<String>, DbErr> {
    let backend = db.get_database_backend();
    let mut moved = HashSet::with_capacity(ends.len());
    for chunk in ends.chunks(FINISH_CHUNK) {
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
            ]);
            let marks: Vec<String> = (first + 1..=values.len()).map(|n| placeholder(backend, n)).collect();
            rows.push(format!("({})", marks.join(", ")));
        }
        // VALUES names its columns column1, column2, … on both SQLite and PostgreSQL.
        let sql = format!(
            "UPDATE messages SET state = v.column3, dead_reason = v.column4, next_attempt_at = v.column5, \
             delivered_at = v.column6, last_status = v.column7, attempt_count = attempt_count + 1, \
             lease_token = NULL, updated_at = {now} \
             FROM (VALUES {}) AS v \
             WHERE messages.id = v.column1 AND messages.lease_token = v.column2 AND messages.state = 'delivering' \
             RETURNING messages.id",
            rows.join(", ")
        );
        for row in db.query_all_raw(Statement::from_sql_and_values(backend, sql, values)).await? {
            moved.insert(row.try_get::<String>("", "id")?);
        }
    }
    Ok(moved)
}

/// Records attempts' ends with their attempt rows, `attempts[i]` the attempt
/// that ended as `ends[i]`: each message moves as in [`finish_many`], and the
/// attempt rows of the messages that moved are inserted (an attempt whose
/// lease was lost is not recorded). Returns the ids that moved. On PostgreSQL
/// one statement does both, its text the same for every batch; `db` must be a
/// transaction there.
pub async fn finish_recording(
    db: &impl ConnectionTrait,
    ends: &[End],
    attempts: Vec<attempt::Model>,
    now_ms: i64,
) -> Result<HashSet<String>, DbErr> {
    if db.get_database_backend() != DbBackend::Postgres {
        let moved = finish_many(db, ends, now_ms).await?;
        super::attempts::insert_many(db, attempts.into_iter().filter(|a| moved.contains(&a.message_id)).collect())
            .await?;
        return Ok(moved);
    }
    // `db` is the recorder's transaction.
    db.execute_unprepared(super::PLAN_ONCE_BY_KEY).await?;
    let mut values = recording_arrays(ends, &attempts);
    values.push(now_ms.into());
    let statement = Statement::from_sql_and_values(DbBackend::Postgres, FINISH_RECORDING.as_str(), values);
    db.query_all_raw(statement).await?.iter().map(|row| row.try_get::<String>("", "id")).collect()
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
        arrays.push("started_at", a.started_at.into());
        arrays.push("duration_ms", a.duration_ms.into());
        arrays.push("status_code", a.status_code.into());
        arrays.push("error_kind", a.error_kind.as_deref().into());
        arrays.push("error_detail", a.error_detail.as_deref().into());
        arrays.push("outcome", a.outcome.as_str().into());
        arrays.push("request_headers", a.request_headers.as_str().into());
        arrays.push("response_headers", a.response_headers.as_str().into());
        arrays.push("response_body", a.response_body.as_deref().into());
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
    col("started_at", Type::Int8),
    col("duration_ms", Type::Int8),
    nullable("status_code", Type::Int4),
    nullable("error_kind", Type::Text),
    nullable("error_detail", Type::Text),
    col("outcome", Type::Text),
    col("request_headers", Type::Text),
    col("response_headers", Type::Text),
    nullable("response_body", Type::Text),
];

/// The parameters: the batch's columns, then the time. The update hands each
/// moved message's attempt row to the insert (RETURNING), so that no join
/// pairs them again. A message holds a lease token only while delivering
/// (every way out clears it, every claim draws a new one), so the token alone
/// guards the update: saying the state too would offer the plan an index on
/// it, which a plan made on an empty table takes instead of the primary key.
static FINISH_RECORDING: LazyLock<String> = LazyLock::new(|| {
    let attempts = attempt::Column::iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ");
    let now = recordset::parameters(RECORDING_COLUMNS) + 1;
    format!(
        "WITH moved AS ( \
           UPDATE messages SET state = r.state, dead_reason = r.dead_reason, next_attempt_at = r.next_attempt_at, \
             delivered_at = r.delivered_at, last_status = r.last_status, attempt_count = attempt_count + 1, \
             lease_token = NULL, updated_at = ${now} \
           FROM {} \
           WHERE messages.id = r.id AND messages.lease_token = r.lease_token \
           RETURNING messages.id AS message_id, messages.customer_id, \
             messages.attempt_count AS number, r.started_at, r.duration_ms, r.status_code, r.error_kind, \
             r.error_detail, r.outcome, r.request_headers, r.response_headers, r.response_body \
         ), recorded AS ( \
           INSERT INTO attempts ({attempts}) SELECT {attempts} FROM moved \
         ) SELECT message_id AS id FROM moved",
        recordset::rows(RECORDING_COLUMNS, 1, "r"),
    )
});

/// How PostgreSQL plans the statement of [`finish_recording`] in the
/// recorder's transaction: the plan's lines, and whether it is the one plan
/// kept for every batch (generic) rather than made for this one.
pub async fn recording_plan(db: &DatabaseConnection) -> Result<(Vec<String>, bool), DbErr> {
    let txn = db.begin().await?;
    txn.execute_unprepared(super::PLAN_ONCE_BY_KEY).await?;
    txn.execute_unprepared(&format!("PREPARE herald_recording AS {}", FINISH_RECORDING.as_str())).await?;
    let parameters = recordset::parameters(RECORDING_COLUMNS) + 1;
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

fn placeholder(backend: DbBackend, n: usize) -> String {
    match backend {
        DbBackend::Postgres => format!("${n}"),
        _ => "?".to_string(),
    }
}

/// Gives a leased message back without an attempt: deferred until a probe,
/// held behind a locked endpoint, expired while waiting, or its subscription
/// gone. The attempt count stays as it was.
pub async fn release_unattempted(
    db: &impl ConnectionTrait,
    id: &str,
    lease_token: i64,
    now_ms: i64,
    finish: Finish,
) -> Result<bool, DbErr> {
    let update = Messages::update_many()
        .col_expr(Column::State, Expr::val(finish.state.as_str()))
        .col_expr(Column::DeadReason, Expr::val(finish.dead_reason))
        .col_expr(Column::NextAttemptAt, Expr::val(finish.next_attempt_at))
        .col_expr(Column::LeaseToken, Expr::val(Option::<i64>::None))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::Id.eq(id))
        .filter(Column::State.eq(MessageState::Delivering.as_str()))
        .filter(Column::LeaseToken.eq(lease_token));
    Ok(update.exec(db).await?.rows_affected == 1)
}

/// Gives claimed messages back unattempted, due at `due_ms` (their endpoint
/// was busy); one claim's messages share its lease token.
pub async fn put_back(
    db: &impl ConnectionTrait,
    ids: Vec<String>,
    lease_token: i64,
    due_ms: i64,
    now_ms: i64,
) -> Result<u64, DbErr> {
    let result = Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Pending.as_str()))
        .col_expr(Column::NextAttemptAt, Expr::val(due_ms))
        .col_expr(Column::LeaseToken, Expr::val(Option::<i64>::None))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::Id.is_in(ids))
        .filter(Column::State.eq(MessageState::Delivering.as_str()))
        .filter(Column::LeaseToken.eq(lease_token))
        .exec(db)
        .await?;
    Ok(result.rows_affected)
}

/// Puts a leased message back, unattempted, until `until_ms` (its endpoint's
/// next probe) — or due now if the circuit has closed meanwhile, so that a
/// deferral racing a successful probe never strands the message.
pub async fn defer(
    db: &impl ConnectionTrait,
    id: &str,
    lease_token: i64,
    until_ms: i64,
    now_ms: i64,
) -> Result<bool, DbErr> {
    let closed = Query::select()
        .expr(Expr::val(1))
        .from(endpoint::Entity)
        .and_where(Expr::col((endpoint::Entity, endpoint::Column::Id)).equals((Messages, Column::EndpointId)))
        .and_where(Expr::col((endpoint::Entity, endpoint::Column::State)).eq(EndpointState::Closed.as_str()))
        .to_owned();
    let result = Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Pending.as_str()))
        .col_expr(Column::NextAttemptAt, Expr::case(Expr::exists(closed), now_ms).finally(until_ms).into())
        .col_expr(Column::LeaseToken, Expr::val(Option::<i64>::None))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::Id.eq(id))
        .filter(Column::State.eq(MessageState::Delivering.as_str()))
        .filter(Column::LeaseToken.eq(lease_token))
        .exec(db)
        .await?;
    Ok(result.rows_affected == 1)
}

/// Makes a dead or delivered message due now as a new series: same id, its
/// attempts kept, a fresh attempt budget and TTL.
pub async fn replay(
    db: &impl ConnectionTrait,
    filter: &MessageFilter,
    ids: Option<Vec<String>>,
    now_ms: i64,
) -> Result<u64, DbErr> {
    let replayable = [MessageState::Dead.as_str(), MessageState::Delivered.as_str()];
    let mut update = Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Pending.as_str()))
        .col_expr(Column::DeadReason, Expr::val(Option::<String>::None))
        .col_expr(Column::NextAttemptAt, Expr::val(now_ms))
        .col_expr(Column::AttemptBase, Expr::col(Column::AttemptCount))
        .col_expr(Column::TtlStartedAt, Expr::val(now_ms))
        // The new series lives as long as the first one did.
        .col_expr(
            Column::ExpiresAt,
            Expr::val(now_ms).add(Expr::col(Column::ExpiresAt).sub(Expr::col(Column::TtlStartedAt))),
        )
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(filter.condition())
        .filter(Column::State.is_in(replayable));
    if let Some(ids) = ids {
        update = update.filter(Column::Id.is_in(ids));
    }
    Ok(update.exec(db).await?.rows_affected)
}

/// Holds every waiting message of an endpoint that just locked; each is due
/// to expire at the end of its TTL.
pub async fn hold_endpoint(db: &impl ConnectionTrait, endpoint_id: &str, now_ms: i64) -> Result<u64, DbErr> {
    Ok(holding(endpoint_id, now_ms).exec(db).await?.rows_affected)
}

fn holding(endpoint_id: &str, now_ms: i64) -> sea_orm::UpdateMany<Messages> {
    Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Held.as_str()))
        .col_expr(Column::NextAttemptAt, Expr::col(Column::ExpiresAt))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::EndpointId.eq(endpoint_id))
        .filter(Column::State.eq(MessageState::Pending.as_str()))
        .filter(waiting())
}

/// Makes an endpoint's waiting messages due now: held ones after an unlock,
/// and pending ones due before `up_to_ms` (those deferred to a probe) when its
/// circuit closes. Retries scheduled later keep their time.
pub async fn release_endpoint(
    db: &impl ConnectionTrait,
    endpoint_id: &str,
    up_to_ms: i64,
    now_ms: i64,
) -> Result<u64, DbErr> {
    Ok(releasing(endpoint_id, up_to_ms, now_ms).exec(db).await?.rows_affected)
}

fn releasing(endpoint_id: &str, up_to_ms: i64, now_ms: i64) -> sea_orm::UpdateMany<Messages> {
    let released = Condition::any().add(Column::State.eq(MessageState::Held.as_str())).add(
        Condition::all().add(Column::State.eq(MessageState::Pending.as_str())).add(Column::NextAttemptAt.lte(up_to_ms)),
    );
    Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Pending.as_str()))
        .col_expr(Column::NextAttemptAt, Expr::val(now_ms))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::EndpointId.eq(endpoint_id))
        .filter(released)
        .filter(waiting())
}

/// Held messages whose TTL has ended become dead, `expired`.
pub async fn expire_held(db: &impl ConnectionTrait, now_ms: i64) -> Result<u64, DbErr> {
    let mut expired = 0;
    // One statement per lane, each reading that lane's index.
    for lane in [FRESH_LANE, RETRY_LANE] {
        expired += expire_held_in(lane, now_ms).exec(db).await?.rows_affected;
    }
    Ok(expired)
}

fn expire_held_in(lane: &'static str, now_ms: i64) -> sea_orm::UpdateMany<Messages> {
    Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Dead.as_str()))
        .col_expr(Column::DeadReason, Expr::val("expired"))
        .col_expr(Column::NextAttemptAt, Expr::val(Option::<i64>::None))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::State.eq(MessageState::Held.as_str()))
        .filter(Expr::cust(lane))
        .filter(Column::NextAttemptAt.lte(now_ms))
}

/// Ends the pending messages of a deleted subscription.
pub async fn kill_for_subscription(
    db: &impl ConnectionTrait,
    subscription_id: &str,
    now_ms: i64,
) -> Result<u64, DbErr> {
    let open = [MessageState::Pending.as_str(), MessageState::Held.as_str()];
    let result = Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Dead.as_str()))
        .col_expr(Column::DeadReason, Expr::val("subscription_deleted"))
        .col_expr(Column::NextAttemptAt, Expr::val(Option::<i64>::None))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::SubscriptionId.eq(subscription_id))
        .filter(Column::State.is_in(open))
        .exec(db)
        .await?;
    Ok(result.rows_affected)
}

/// Points the open messages of a subscription at its new endpoint after a URL change.
pub async fn move_to_endpoint(
    db: &impl ConnectionTrait,
    subscription_id: &str,
    endpoint_id: &str,
) -> Result<(), DbErr> {
    Messages::update_many()
        .col_expr(Column::EndpointId, Expr::val(endpoint_id))
        .filter(Column::SubscriptionId.eq(subscription_id))
        .filter(Column::State.is_in([MessageState::Pending.as_str(), MessageState::Held.as_str()]))
        .exec(db)
        .await
        .map(|_| ())
}

/// How many messages are in each state: (state, count). One statement, so
/// one snapshot: the messages not delivered by state, from the log by state
/// that holds only them, and the delivered ones as all the rest.
pub async fn count_by_state(db: &impl ConnectionTrait, customer_id: Option<&str>) -> Result<Vec<(String, i64)>, DbErr> {
    let backend = db.get_database_backend();
    let parameter = if backend == DbBackend::Postgres { "$1" } else { "?1" };
    let (of_customer, values) = match customer_id {
        Some(id) => (format!("customer_id = {parameter}"), vec![Value::from(id)]),
        None => ("TRUE".to_string(), Vec::new()),
    };
    let delivered = MessageState::Delivered.as_str();
    let sql = format!(
        "WITH undelivered AS ( \
           SELECT state, count(*) AS n FROM messages WHERE {UNDELIVERED} AND {of_customer} GROUP BY state) \
         SELECT state, n FROM undelivered \
         UNION ALL SELECT '{delivered}', CAST((SELECT count(*) FROM messages WHERE {of_customer}) \
           - (SELECT coalesce(sum(n), 0) FROM undelivered) AS BIGINT)"
    );
    let rows = db.query_all_raw(Statement::from_sql_and_values(backend, sql, values)).await?;
    rows.iter().map(|row| Ok((row.try_get("", "state")?, row.try_get::<i64>("", "n")?))).collect()
}

#[cfg(test)]
mod tests {
    use sea_orm::{Database, QueryTrait};

    use super::*;

    /// SQLite's query plan of `stmt` on a fresh schema, a line per step.
    async fn plan(stmt: Statement) -> Vec<String> {
        let db = Database::connect("sqlite::memory:").await.unwrap();
        super::super::migrate(&db).await.unwrap();
        let explain = Statement::from_sql_and_values(
            DbBackend::Sqlite,
            format!("EXPLAIN QUERY PLAN {}", stmt.sql),
            stmt.values.map(|v| v.0).unwrap_or_default(),
        );
        let rows = db.query_all_raw(explain).await.unwrap();
        rows.iter().map(|r| r.try_get::<String>("", "detail").unwrap()).collect()
    }

    /// The plan of the claim's pick for `lane`.
    async fn pick_plan(lane: Lane, among: Among<'_>) -> String {
        let condition = lane_due(DbBackend::Sqlite, lane, 1_000, among);
        let select = Messages::find().select_only().column(Column::Id).filter(condition);
        plan(select.order_by_asc(Column::NextAttemptAt).limit(128).build(DbBackend::Sqlite)).await.join("\n")
    }

    #[test]
    fn a_batch_carries_every_column_of_a_message() {
        super::super::recordset::tests::covers::<Messages>(COLUMNS);
    }

    #[tokio::test]
    async fn each_lane_reads_its_own_partial_index() {
        let busy = ["ep_busy".to_string()];
        let fresh = pick_plan(Lane::Fresh, Among::AllBut(&busy)).await;
        assert!(fresh.contains("idx_messages_fresh (state=? AND next_attempt_at<?)"), "{fresh}");
        assert!(!fresh.contains("idx_messages_retry"), "{fresh}");
        let retry = pick_plan(Lane::Retry, Among::AllBut(&busy)).await;
        assert!(retry.contains("idx_messages_retry (state=? AND next_attempt_at<?)"), "{retry}");
    }

    /// The retry lane reads the fresh lane's index only for first attempts whose
    /// lease ended (`delivering`, due), never its pending messages.
    #[tokio::test]
    async fn the_retry_lane_finds_ended_leases_in_both_lanes_indexes() {
        let retry = pick_plan(Lane::Retry, Among::AllBut(&[])).await;
        assert!(retry.contains("MULTI-INDEX OR"), "{retry}");
        assert!(retry.contains("idx_messages_retry (state=? AND next_attempt_at<?)"), "{retry}");
        assert!(retry.contains("idx_messages_fresh (state=? AND next_attempt_at<?)"), "{retry}");
        assert!(!retry.contains("SCAN messages"), "{retry}");
    }

    #[tokio::test]
    async fn expiry_reads_each_lanes_index() {
        for (lane, index) in [(FRESH_LANE, "idx_messages_fresh"), (RETRY_LANE, "idx_messages_retry")] {
            let update = expire_held_in(lane, 1_000).build(DbBackend::Sqlite);
            let plan = plan(update).await.join("\n");
            assert!(plan.contains(&format!("{index} (state=? AND next_attempt_at<?)")), "{plan}");
        }
    }

    #[tokio::test]
    async fn the_log_by_state_reads_the_undelivered_index_except_for_delivered() {
        let log = |state| async move {
            let filter = MessageFilter { customer_id: Some("cus_a".into()), state: Some(state), ..Default::default() };
            let select = Messages::find().filter(filter.condition()).order_by_desc(Column::Id).limit(51);
            plan(select.build(DbBackend::Sqlite)).await.join("\n")
        };
        let dead = log(MessageState::Dead).await;
        assert!(dead.contains("idx_messages_customer_undelivered (customer_id=? AND state=?)"), "{dead}");
        let delivered = log(MessageState::Delivered).await;
        assert!(delivered.contains("idx_messages_customer (customer_id=?)"), "{delivered}");
    }

    #[tokio::test]
    async fn a_claim_for_one_endpoint_reads_that_endpoints_index_range() {
        let fresh = pick_plan(Lane::Fresh, Among::Endpoint("ep_a")).await;
        assert!(
            fresh.contains("idx_messages_endpoint_waiting (endpoint_id=? AND state=? AND next_attempt_at<?)"),
            "{fresh}"
        );
        let retry = pick_plan(Lane::Retry, Among::Endpoint("ep_a")).await;
        assert!(
            retry.contains("idx_messages_endpoint_waiting (endpoint_id=? AND state=? AND next_attempt_at<?)"),
            "{retry}"
        );
        assert!(!retry.contains("SCAN messages"), "ended leases are found in the lanes' indexes: {retry}");
    }

    #[tokio::test]
    async fn locking_and_unlocking_an_endpoint_read_its_waiting_messages() {
        let hold = plan(holding("ep_a", 1_000).build(DbBackend::Sqlite)).await.join("\n");
        assert!(hold.contains("idx_messages_endpoint_waiting (endpoint_id=? AND state=?"), "{hold}");
        let release = plan(releasing("ep_a", 1_000, 1_000).build(DbBackend::Sqlite)).await.join("\n");
        assert!(release.contains("idx_messages_endpoint_waiting (endpoint_id=?"), "{release}");
        assert!(!release.contains("SCAN messages"), "{release}");
    }

    #[tokio::test]
    async fn the_claims_update_finds_its_rows_by_id() {
        let update = Messages::update_many()
            .col_expr(Column::State, Expr::val(MessageState::Delivering.as_str()))
            .filter(Column::Id.is_in(["msg_a", "msg_b"]))
            .filter(not_leased(1_000))
            .build(DbBackend::Sqlite);
        assert_eq!(plan(update).await, ["SEARCH messages USING INDEX sqlite_autoindex_messages_1 (id=?)"]);
    }
}
