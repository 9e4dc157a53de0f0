//! The delivery log's reads: a filtered page of messages, and the counts by state.

use domain::ids::{CustomerId, MessageId, SubscriptionId};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter};
use sea_orm::{Statement, Value};

use domain::states::MessageState;
use migrations::UNDELIVERED;

use crate::ids::{ID_AFTER_CREATION_MS, first_id_at};
use crate::store::entities::message::{self, Column, Entity as Messages};
use crate::store::page::{self, PageRequest};
use crate::store::{counts, placeholder};
/// The delivery log's filters; `None` means any.
#[derive(Debug, Clone, Default)]
pub struct MessageFilter {
    /// Only these messages (an event's, found by its CloudEvent id).
    pub ids: Option<Vec<MessageId>>,
    pub customer_id: Option<CustomerId>,
    pub subscription_id: Option<SubscriptionId>,
    pub state: Option<MessageState>,
    pub event_type: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
}

impl MessageFilter {
    pub(super) fn condition(&self) -> Condition {
        let mut cond = self.indexed();
        if let Some(v) = self.state.filter(|_| !self.state_indexed()) {
            cond = cond.add(Column::State.eq(v.as_str()));
            if v != MessageState::Delivered {
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

    /// What the log's indexes, all ordered by id, answer: the messages named, a
    /// customer's (by state when undelivered), a subscription's, and the end of a window.
    fn indexed(&self) -> Condition {
        let mut cond = Condition::all();
        if let Some(ids) = &self.ids {
            cond = cond.add(Column::Id.is_in(ids.iter().map(MessageId::as_str)));
        }
        if let Some(v) = &self.customer_id {
            cond = cond.add(Column::CustomerId.eq(v.as_str()));
        }
        if let Some(v) = &self.subscription_id {
            cond = cond.add(Column::SubscriptionId.eq(v.as_str()));
        }
        if let Some(v) = self.state.filter(|_| self.state_indexed()) {
            // Said literally, so that both databases read the log by state, which holds only these.
            cond = cond.add(Column::State.eq(v.as_str())).add(Expr::cust(UNDELIVERED));
        }
        if let Some(v) = self.until_ms {
            // The id bound lets the scan start at the window's end rather than walk down to it
            // from the newest message.
            cond = cond.add(Column::Id.lt(first_id_at("msg", v + ID_AFTER_CREATION_MS)));
        }
        cond
    }

    /// A customer's messages not delivered have an index by state.
    fn state_indexed(&self) -> bool {
        self.customer_id.is_some() && self.state.is_some_and(|s| s != MessageState::Delivered)
    }

    /// Whether some condition is checked row by row, so that a search must be bounded.
    fn checks_rows(&self) -> bool {
        let state = self.state.is_some() && !self.state_indexed();
        self.ids.is_none() && (state || self.event_type.is_some() || self.since_ms.is_some())
    }
}

/// Newest first; fetches one row more than the page to know whether another follows.
/// A filter checked row by row reads at most [`crate::store::page::SCAN_BUDGET`] rows: then the id of the
/// last one read comes back too (see [`crate::store::page`]).
pub async fn list(
    db: &impl ConnectionTrait,
    filter: &MessageFilter,
    page: &PageRequest,
) -> Result<(Vec<message::Model>, Option<String>), DbErr> {
    let range = filter.checks_rows().then(|| Messages::find().filter(filter.indexed()));
    page::newest_first(db, range, Messages::find().filter(filter.condition()), Column::Id, page).await
}

/// How many messages are in each state: (state, count). The messages not
/// delivered by state in one statement, from the log by state that holds only
/// them; the delivered ones as all the rest of the messages kept (the
/// customer's count, or every customer's: see [`counts`]). A message that
/// moves between the two reads is counted as it was at one of them.
pub async fn count_by_state(
    db: &impl ConnectionTrait,
    customer_id: Option<&CustomerId>,
) -> Result<Vec<(MessageState, u64)>, DbErr> {
    let backend = db.get_database_backend();
    let (of_customer, values) = match customer_id {
        Some(id) => (format!("customer_id = {}", placeholder(backend, 1)), vec![Value::from(id.as_str())]),
        None => ("TRUE".to_string(), Vec::new()),
    };
    let sql = format!("SELECT state, count(*) AS n FROM messages WHERE {UNDELIVERED} AND {of_customer} GROUP BY state");
    let rows = db.query_all_raw(Statement::from_sql_and_values(backend, sql, values)).await?;
    let mut counts = Vec::with_capacity(rows.len() + 1);
    for row in rows {
        let n = row.try_get::<i64>("", "n")?.max(0) as u64;
        if let Some(state) = MessageState::parse(&row.try_get::<String>("", "state")?) {
            counts.push((state, n));
        }
    }
    let undelivered: u64 = counts.iter().map(|(_, n)| n).sum();
    let all = counts::messages_kept(db, customer_id).await?;
    counts.push((MessageState::Delivered, all.saturating_sub(undelivered)));
    Ok(counts)
}
