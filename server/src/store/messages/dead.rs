//! What Herald reports of messages that became dead (`herald.message.dead`):
//! each one's ids, its event's published id and source, and how it ended.

use domain::ids::{CustomerId, MessageId};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, JoinType, QueryFilter, QuerySelect};

use domain::operational::DeadReport;
use domain::states::MessageState;

use crate::store::entities::event;
use crate::store::entities::message::{Column, Entity as Messages};

/// Ids per statement, well within both databases' limits on bound values.
const IDS_PER_STATEMENT: usize = 500;

type Row = (CustomerId, String, String, String, String, Option<String>, i32, Option<i32>);

/// The reports of those of `ids` that are dead, each with its customer's id.
pub async fn dead_reports(
    db: &impl ConnectionTrait,
    ids: &[MessageId],
) -> Result<Vec<(CustomerId, DeadReport)>, DbErr> {
    let mut reports = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(IDS_PER_STATEMENT) {
        let to_event = Messages::belongs_to(event::Entity).from(Column::EventId).to(event::Column::Id);
        let rows: Vec<Row> = Messages::find()
            .select_only()
            .columns([Column::CustomerId, Column::Id, Column::SubscriptionId])
            .column(event::Column::CeId)
            .column(event::Column::Source)
            .columns([Column::DeadReason, Column::AttemptCount, Column::LastStatus])
            .join(JoinType::InnerJoin, to_event.into())
            .filter(Column::Id.is_in(chunk.iter().cloned()))
            .filter(Column::State.eq(MessageState::Dead.as_str()))
            .into_tuple()
            .all(db)
            .await?;
        reports.extend(rows.into_iter().map(
            |(customer_id, message_id, subscription_id, event_id, event_source, dead_reason, attempts, status)| {
                let report = DeadReport {
                    message_id,
                    subscription_id,
                    event_id,
                    event_source,
                    dead_reason,
                    attempt_count: attempts.into(),
                    last_status: status.map(i64::from),
                };
                (customer_id, report)
            },
        ));
    }
    Ok(reports)
}
