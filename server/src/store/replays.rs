//! Replay jobs: stored, leased by the process that works on them, moved on batch by batch.

use domain::ids::ReplayId;
use domain::states::ReplayState;
use sea_orm::sea_query::{Expr, ExprTrait, LockBehavior, LockType};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect,
};

use super::entities::replay::{self, Column, Entity as Replays};

pub async fn insert(db: &impl ConnectionTrait, row: replay::Model) -> Result<(), DbErr> {
    row.into_active_model().insert(db).await.map(|_| ())
}

pub async fn get(db: &impl ConnectionTrait, id: &ReplayId) -> Result<Option<replay::Model>, DbErr> {
    Replays::find_by_id(id.clone()).one(db).await
}

/// A running job whose lease ended (or that none held), leased to `token` until `lease_until`.
pub async fn lease_next(
    db: &impl ConnectionTrait,
    token: i64,
    now_ms: i64,
    lease_until: i64,
) -> Result<Option<replay::Model>, DbErr> {
    let free = Replays::find()
        .select_only()
        .column(Column::Id)
        .filter(Column::State.eq(ReplayState::Running.as_str()))
        .filter(Column::LeaseUntil.lte(now_ms))
        .order_by_asc(Column::CreatedAt)
        .limit(1)
        .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
        .into_tuple::<ReplayId>()
        .one(db)
        .await?;
    let Some(id) = free else { return Ok(None) };
    let leased = Replays::update_many()
        .col_expr(Column::LeaseToken, Expr::val(token))
        .col_expr(Column::LeaseUntil, Expr::val(lease_until))
        .filter(Column::Id.eq(id.clone()))
        .filter(Column::State.eq(ReplayState::Running.as_str()))
        .filter(Column::LeaseUntil.lte(now_ms))
        .exec(db)
        .await?;
    if leased.rows_affected == 0 {
        return Ok(None);
    }
    get(db, &id).await
}

/// Records a batch done in the batch's transaction: the job moves to `cursor` with `added` more
/// replayed, ends `done` when `last`, and keeps its lease until `lease_until`. `false`, changing
/// nothing, when `token` no longer holds the job (cancelled, or taken over after its lease
/// ended): the batch must then be rolled back.
pub async fn advance(db: &impl ConnectionTrait, id: &ReplayId, token: i64, step: &Advance) -> Result<bool, DbErr> {
    let mut update = Replays::update_many()
        .col_expr(Column::Replayed, Expr::col(Column::Replayed).add(step.added as i64))
        .col_expr(Column::Cursor, Expr::val(step.cursor.clone()))
        .col_expr(Column::LeaseUntil, Expr::val(step.lease_until))
        .col_expr(Column::UpdatedAt, Expr::val(step.now_ms));
    if step.last {
        update = update
            .col_expr(Column::State, Expr::val(ReplayState::Done.as_str()))
            .col_expr(Column::FinishedAt, Expr::val(step.now_ms));
    }
    let moved = update
        .filter(Column::Id.eq(id.clone()))
        .filter(Column::LeaseToken.eq(token))
        .filter(Column::State.eq(ReplayState::Running.as_str()))
        .exec(db)
        .await?;
    Ok(moved.rows_affected == 1)
}

/// One batch's progress.
pub struct Advance {
    pub added: u64,
    pub cursor: Option<String>,
    pub last: bool,
    pub now_ms: i64,
    pub lease_until: i64,
}

/// Ends a running job as `state` (cancelled, or failed): whether it was running.
pub async fn finish(db: &impl ConnectionTrait, id: &ReplayId, state: ReplayState, now_ms: i64) -> Result<bool, DbErr> {
    let ended = Replays::update_many()
        .col_expr(Column::State, Expr::val(state.as_str()))
        .col_expr(Column::FinishedAt, Expr::val(now_ms))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::Id.eq(id.clone()))
        .filter(Column::State.eq(ReplayState::Running.as_str()))
        .exec(db)
        .await?;
    Ok(ended.rows_affected == 1)
}

/// How many jobs are running.
pub async fn running(db: &impl ConnectionTrait) -> Result<u64, DbErr> {
    Replays::find().filter(Column::State.eq(ReplayState::Running.as_str())).count(db).await
}

/// Removes the jobs that ended before `ended_before`: how many.
pub async fn remove_ended(db: &impl ConnectionTrait, ended_before: i64) -> Result<u64, DbErr> {
    let removed = Replays::delete_many()
        .filter(Column::State.ne(ReplayState::Running.as_str()))
        .filter(Column::FinishedAt.lt(ended_before))
        .exec(db)
        .await?;
    Ok(removed.rows_affected)
}

/// Frees the jobs leased with a token in `tokens` (a stopped process's), or every job: another
/// process, or this one after a restart, goes on with them at once.
pub async fn release_leases(db: &impl ConnectionTrait, tokens: Option<std::ops::Range<i64>>) -> Result<u64, DbErr> {
    let mut update = Replays::update_many()
        .col_expr(Column::LeaseUntil, Expr::val(0i64))
        .filter(Column::State.eq(ReplayState::Running.as_str()));
    if let Some(tokens) = tokens {
        update = update.filter(Column::LeaseToken.gte(tokens.start)).filter(Column::LeaseToken.lt(tokens.end));
    }
    Ok(update.exec(db).await?.rows_affected)
}

/// Frees one job, for any process to go on with at once.
pub async fn release_leases_of(db: &impl ConnectionTrait, id: &ReplayId) -> Result<(), DbErr> {
    let update = Replays::update_many().col_expr(Column::LeaseUntil, Expr::val(0i64)).filter(Column::Id.eq(id.clone()));
    update.exec(db).await.map(|_| ())
}

/// Gathers the archive's statistics where autovacuum does not (PostgreSQL with it off): without
/// them a batch's read of a large archive is planned as a scan of the customer's whole archive.
/// Whether it ran.
pub async fn analyze_unless_autovacuum(db: &impl ConnectionTrait) -> Result<bool, DbErr> {
    if !super::retention::autovacuum_off(db).await? {
        return Ok(false);
    }
    db.execute_unprepared("ANALYZE events").await?;
    Ok(true)
}

/// Makes the rest of a replay batch's transaction plan each statement for the tables as they are
/// then (PostgreSQL): a cached generic plan, made while the archive was small, would go on reading
/// a customer's events whole for every batch once it holds a million (see [`super::PLAN_EACH_TIME`]).
pub async fn plan_each_time(txn: &impl ConnectionTrait) -> Result<(), DbErr> {
    if txn.get_database_backend() == sea_orm::DbBackend::Postgres {
        txn.execute_unprepared(super::PLAN_EACH_TIME).await?;
    }
    Ok(())
}
