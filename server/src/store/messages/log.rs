//! The delivery log's reads: a filtered page of messages, and the counts by state.

use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use sea_orm::{DbBackend, Statement, Value};

use app::domain::states::MessageState;
use migrations::UNDELIVERED;

use crate::ids::{ID_AFTER_CREATION_MS, first_id_at};
use crate::store::entities::message::{self, Column, Entity as Messages};
use crate::store::page::PageRequest;
/// The delivery log's filters; `None` means any.
#[derive(Debug, Clone, Default)]
pub struct MessageFilter {
    /// Only these messages (an event's, found by its CloudEvent id).
    pub ids: Option<Vec<String>>,
    pub customer_id: Option<String>,
    pub subscription_id: Option<String>,
    pub state: Option<MessageState>,
    pub event_type: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
}

impl MessageFilter {
    pub(super) fn condition(&self) -> Condition {
        let mut cond = Condition::all();
        if let Some(ids) = &self.ids {
            cond = cond.add(Column::Id.is_in(ids.iter().map(String::as_str)));
        }
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
            // The id bound lets the log's indexes, all ordered by id, start at the window's end
            // rather than walk down to it from the newest message.
            cond = cond.add(Column::Id.lt(first_id_at("msg", v + ID_AFTER_CREATION_MS))).add(Column::CreatedAt.lt(v));
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
