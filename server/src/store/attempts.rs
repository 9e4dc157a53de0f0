//! Attempts: a message's history, and the counts per minute the overview charts.

use sea_orm::sea_query::{Alias, Expr, ExprTrait, Query};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use super::entities::attempt::{self, Column, Entity as Attempts};
use super::entities::customer;

pub async fn for_message(db: &impl ConnectionTrait, message_id: &str) -> Result<Vec<attempt::Model>, DbErr> {
    Attempts::find().filter(Column::MessageId.eq(message_id)).order_by_asc(Column::Number).all(db).await
}

/// Attempts since `since_ms` counted per minute and outcome: (minute, outcome, count),
/// where minute is unix milliseconds / 60 000.
pub async fn per_minute(
    db: &impl ConnectionTrait,
    customer_id: Option<&str>,
    since_ms: i64,
) -> Result<Vec<(i64, String, i64)>, DbErr> {
    let minute = Expr::col(Column::StartedAt).div(60_000);
    let mut query = Attempts::find()
        .select_only()
        .column_as(minute, "minute")
        .column(Column::Outcome)
        .column_as(Expr::col(Column::Number).count(), "n")
        .filter(Column::StartedAt.gte(since_ms))
        // By the alias: PostgreSQL would see two different expressions in two bound parameters.
        .group_by(Expr::col(Alias::new("minute")))
        .group_by(Column::Outcome);
    query = match customer_id {
        Some(customer_id) => query.filter(Column::CustomerId.eq(customer_id)),
        // Every customer's, each read from the attempts by customer and time: the
        // only index of attempts by time (see migration m0008).
        None => query.filter(
            Column::CustomerId
                .in_subquery(Query::select().column(customer::Column::Id).from(customer::Entity).to_owned()),
        ),
    };
    query.into_tuple().all(db).await
}

pub async fn insert_many(db: &impl ConnectionTrait, rows: Vec<attempt::Model>) -> Result<(), DbErr> {
    super::bulk::insert(db, &rows).await
}
