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
pub use insert::{COLUMNS, PAUSED, insert_many, message_for, pending_message};
pub use log::{MessageFilter, count_by_state, list};
pub use recording::{End, Finish, finish_many, finish_recording, recording_plan};
pub use transitions::*;

use domain::ids::MessageId;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait};

use migrations::WAITING;

use super::entities::message::{self, Column, Entity as Messages};

pub async fn get(db: &impl ConnectionTrait, id: &MessageId) -> Result<Option<message::Model>, DbErr> {
    Messages::find_by_id(id.clone()).one(db).await
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
