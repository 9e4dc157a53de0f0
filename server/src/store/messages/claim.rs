//! The lanes' claim: due messages of one lane leased in one statement.

use domain::ids::{EndpointId, MessageId};
use sea_orm::sea_query::{Expr, LockBehavior, LockType};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, TransactionTrait,
};

use domain::states::MessageState;
use migrations::{FRESH_LANE, RETRY_LANE, WAITING};

use crate::store::entities::message::{self, Column, Entity as Messages};

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
    AllBut(&'a [EndpointId]),
    /// This endpoint's only.
    Endpoint(&'a EndpointId),
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
        txn.execute_unprepared(&format!("SET LOCAL synchronous_commit = off; {}", crate::store::PLAN_EACH_TIME))
            .await?;
    }
    let picked: Vec<MessageId> = pick(lane_condition, limit).all(&txn).await?;
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
pub(super) fn lane_due(backend: DbBackend, lane: Lane, now_ms: i64, among: Among<'_>) -> Condition {
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
        Among::Endpoint(endpoint_id) => {
            Condition::all().add(lane_condition).add(Column::EndpointId.eq(endpoint_id.clone()))
        }
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
pub(super) fn not_leased(now_ms: i64) -> Condition {
    Condition::any().add(Column::LeaseToken.is_null()).add(Column::NextAttemptAt.lte(now_ms))
}

/// The ids of the first `limit` messages due, locked (PostgreSQL) for the claim's update.
fn pick(lane_condition: Condition, limit: u64) -> sea_orm::Selector<sea_orm::SelectGetableTuple<MessageId>> {
    Messages::find()
        .select_only()
        .column(Column::Id)
        .filter(lane_condition)
        .order_by_asc(Column::NextAttemptAt)
        .limit(limit)
        .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
        .into_tuple()
}
