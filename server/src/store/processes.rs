//! The processes serving a shared database, and the leases of those that fell
//! silent. Each process registers at start, beats every few seconds, and draws
//! every lease token with its number in the upper 32 bits (see
//! [`lease_token`]), so the others can find the leases of one that stopped
//! beating and make its messages due again.

use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ActiveValue, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QuerySelect,
};

use super::entities::process::{self, Column, Entity as Processes};
use super::messages;

/// A new lease token of the process numbered `process` (0 where processes are
/// not numbered): its number above, 32 random bits below, never 0.
pub fn lease_token(process: i32) -> i64 {
    (i64::from(process) << 32) | i64::from(rand::random::<u32>().max(1))
}

/// Registers a serving process; returns its number.
pub async fn register(db: &impl ConnectionTrait, host: &str, now_ms: i64) -> Result<i32, DbErr> {
    let row = process::ActiveModel {
        number: ActiveValue::NotSet,
        host: ActiveValue::Set(host.to_string()),
        started_at: ActiveValue::Set(now_ms),
        heartbeat_at: ActiveValue::Set(now_ms),
    };
    Ok(row.insert(db).await?.number)
}

/// Records that `number` is alive; false when its row is gone (the others took
/// it for dead and took back its leases).
pub async fn beat(db: &impl ConnectionTrait, number: i32, now_ms: i64) -> Result<bool, DbErr> {
    let beaten = Processes::update_many()
        .col_expr(Column::HeartbeatAt, Expr::val(now_ms))
        .filter(Column::Number.eq(number))
        .exec(db)
        .await?;
    Ok(beaten.rows_affected > 0)
}

/// The processes whose last heartbeat is older than `silent_since_ms`.
pub async fn silent(db: &impl ConnectionTrait, silent_since_ms: i64) -> Result<Vec<i32>, DbErr> {
    Processes::find()
        .select_only()
        .column(Column::Number)
        .filter(Column::HeartbeatAt.lt(silent_since_ms))
        .into_tuple()
        .all(db)
        .await
}

/// How many processes have beaten since `since_ms`: those alive.
pub async fn alive(db: &impl ConnectionTrait, since_ms: i64) -> Result<u64, DbErr> {
    sea_orm::PaginatorTrait::count(Processes::find().filter(Column::HeartbeatAt.gte(since_ms)), db).await
}

/// Makes the messages leased by process `number` due now, unattempted, and
/// forgets the process. Returns how many messages were taken back.
pub async fn take_back(db: &impl ConnectionTrait, number: i32, now_ms: i64) -> Result<u64, DbErr> {
    let tokens = i64::from(number) << 32..(i64::from(number) + 1) << 32;
    let taken = messages::take_back_leases(db, Some(tokens.clone()), now_ms).await?;
    super::replays::release_leases(db, Some(tokens)).await?;
    Processes::delete_many().filter(Column::Number.eq(number)).exec(db).await?;
    Ok(taken)
}
