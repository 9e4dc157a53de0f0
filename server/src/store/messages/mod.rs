//! Messages: insertion, the delivery log's queries, and the worker's claim and
//! finish, every state change guarded by the state (and lease) it expects.

mod claim;
mod dead;
pub mod gauges;
mod insert;
mod log;
#[cfg(test)]
pub(crate) mod plans;
mod recording;
mod transitions;

pub use claim::{Among, Lane, claim};
pub use dead::dead_reports;
pub use insert::{COLUMNS, PAUSED, insert_many, insert_many_direct, message_for, pending_message};
pub use log::{MessageFilter, count_by_state, list};
pub use recording::{End, Finish, finish_many, finish_recording, finish_recording_direct, recording_plan};
pub use transitions::*;

use domain::ids::MessageId;
use sea_orm::sea_query::{Alias, Expr};
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QuerySelect};

use migrations::WAITING;

use super::entities::message::{self, Column, Entity as Messages};

pub async fn get(db: &impl ConnectionTrait, id: &MessageId) -> Result<Option<message::Model>, DbErr> {
    Messages::find_by_id(id.clone()).one(db).await
}

/// The attempt counts at which the message's replays began, oldest first: its attempts after
/// each belong to that replay's series. Kept beside the row, out of the delivery path's reads.
pub async fn series_starts(db: &impl ConnectionTrait, id: &MessageId) -> Result<Vec<u32>, DbErr> {
    let starts: Option<String> = Messages::find_by_id(id.clone())
        .select_only()
        .column_as(Expr::col(Alias::new("series_starts")), "series_starts")
        .into_tuple()
        .one(db)
        .await?;
    Ok(starts.unwrap_or_default().split(',').filter_map(|n| n.parse().ok()).collect())
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
