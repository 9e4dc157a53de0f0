//! The answers kept for `Idempotency-Key`, one row per caller and key.

use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder, QuerySelect,
};

use super::entities::idempotency_key::{self, Column, Entity as Keys};

/// How long a key's answer is kept, from its first use.
pub const KEPT_MS: i64 = 24 * 3_600_000;

pub const RUNNING: &str = "running";
pub const DONE: &str = "done";

/// A key's request: it holds the key as `owner` until `locked_until`.
pub struct Claim<'a> {
    pub caller: &'a str,
    pub key: &'a str,
    pub fingerprint: &'a str,
    pub owner: i64,
    pub now_ms: i64,
    pub locked_until: i64,
}

/// Stores the key as running: `false` when the caller already has it.
pub async fn insert(db: &impl ConnectionTrait, claim: &Claim<'_>) -> Result<bool, DbErr> {
    let row = idempotency_key::Model {
        caller: claim.caller.to_string(),
        key: claim.key.to_string(),
        fingerprint: claim.fingerprint.to_string(),
        state: RUNNING.to_string(),
        owner: claim.owner,
        locked_until: claim.locked_until,
        status: None,
        content_type: None,
        body: None,
        created_at: claim.now_ms,
    };
    let rows = Keys::insert(row.into_active_model())
        .on_conflict(OnConflict::columns([Column::Caller, Column::Key]).do_nothing().to_owned())
        .exec_without_returning(db)
        .await?;
    Ok(rows == 1)
}

pub async fn get(db: &impl ConnectionTrait, caller: &str, key: &str) -> Result<Option<idempotency_key::Model>, DbErr> {
    Keys::find_by_id((caller.to_string(), key.to_string())).one(db).await
}

/// Takes over a running key whose lock ended, for `claim.owner`: whether it won it. Whatever the
/// request that held it does next cannot answer it (answers name their owner), so its change,
/// made in the same transaction as its answer, is rolled back.
pub async fn take_over(
    db: &impl ConnectionTrait,
    found: &idempotency_key::Model,
    claim: &Claim<'_>,
) -> Result<bool, DbErr> {
    let taken = Keys::update_many()
        .col_expr(Column::Owner, Expr::val(claim.owner))
        .col_expr(Column::LockedUntil, Expr::val(claim.locked_until))
        .filter(of_key(claim.caller, claim.key))
        .filter(Column::State.eq(RUNNING))
        .filter(Column::Owner.eq(found.owner))
        .filter(Column::LockedUntil.eq(found.locked_until))
        .exec(db)
        .await?;
    Ok(taken.rows_affected == 1)
}

/// Removes a key's row that is older than its 24 h (`created_before`), so that the key can be
/// used anew.
pub async fn remove_expired(
    db: &impl ConnectionTrait,
    caller: &str,
    key: &str,
    created_before: i64,
) -> Result<(), DbErr> {
    Keys::delete_many()
        .filter(of_key(caller, key))
        .filter(Column::CreatedAt.lt(created_before))
        .exec(db)
        .await
        .map(|_| ())
}

/// What a request answered, to keep.
pub struct Answer<'a> {
    pub status: u16,
    pub content_type: Option<&'a str>,
    /// Sealed.
    pub body: Option<String>,
}

/// Keeps the answer of the running key `owner` holds: in the transaction of the change it
/// answers, or alone when the request changed nothing. `false` when `owner` no longer holds it.
pub async fn answer(
    db: &impl ConnectionTrait,
    caller: &str,
    key: &str,
    owner: i64,
    answer: Answer<'_>,
) -> Result<bool, DbErr> {
    let kept = Keys::update_many()
        .col_expr(Column::State, Expr::val(DONE))
        .col_expr(Column::Status, Expr::val(answer.status as i32))
        .col_expr(Column::ContentType, Expr::val(answer.content_type.map(str::to_string)))
        .col_expr(Column::Body, Expr::val(answer.body))
        .filter(of_key(caller, key))
        .filter(Column::State.eq(RUNNING))
        .filter(Column::Owner.eq(owner))
        .exec(db)
        .await?;
    Ok(kept.rows_affected == 1)
}

/// Forgets a key `owner` still holds (its request failed in a way worth retrying, or went away).
pub async fn release(db: &impl ConnectionTrait, caller: &str, key: &str, owner: i64) -> Result<(), DbErr> {
    Keys::delete_many()
        .filter(of_key(caller, key))
        .filter(Column::State.eq(RUNNING))
        .filter(Column::Owner.eq(owner))
        .exec(db)
        .await
        .map(|_| ())
}

/// The row of the caller's key.
fn of_key(caller: &str, key: &str) -> Condition {
    Condition::all().add(Column::Caller.eq(caller)).add(Column::Key.eq(key))
}

/// Removes up to `limit` keys first used before `created_before`: how many.
pub async fn remove_old(db: &impl ConnectionTrait, created_before: i64, limit: u64) -> Result<u64, DbErr> {
    let oldest: Vec<i64> = Keys::find()
        .select_only()
        .column(Column::CreatedAt)
        .filter(Column::CreatedAt.lt(created_before))
        .order_by_asc(Column::CreatedAt)
        .limit(limit)
        .into_tuple()
        .all(db)
        .await?;
    let Some(&last) = oldest.last() else { return Ok(0) };
    let removed = Keys::delete_many().filter(Column::CreatedAt.lte(last)).exec(db).await?;
    Ok(removed.rows_affected)
}
