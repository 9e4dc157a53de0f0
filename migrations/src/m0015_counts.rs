//! Counts kept beside the rows they count, so that the overview and the gauges
//! read a few rows instead of the history:
//!
//! - `message_counts`: the messages kept of each customer, added to by every
//!   insert of messages and taken from by retention, in the same transaction.
//! - `attempt_counts`: each customer's attempts per minute (of their start),
//!   succeeded and failed, added to by the recorder in the same transaction as
//!   the attempts. A row per writer (`writer`: the process and one of its
//!   recorders), so that batches written at once never wait for one another's
//!   row; a minute's count is the sum of its rows. Kept for a day.
//!
//! Both are filled here from the rows already stored: every message, and the
//! attempts of the last day.

use std::time::{SystemTime, UNIX_EPOCH};

use sea_orm_migration::sea_orm::DbBackend;
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum MessageCounts {
    Table,
    CustomerId,
    Messages,
}

#[derive(DeriveIden)]
enum AttemptCounts {
    Table,
    CustomerId,
    Minute,
    Writer,
    Succeeded,
    Failed,
}

const BY_MINUTE: &str = "idx_attempt_counts_minute";
/// How long the minutes of `attempt_counts` are kept (the retention sweeper trims them).
pub const MINUTES_KEPT: i64 = 24 * 60;

fn customer_key<T: IntoIden>(m: &SchemaManager, name: T) -> ColumnDef {
    let mut column = string(name);
    if m.get_database_backend() == DbBackend::Postgres {
        // Compared byte by byte, as every key is (m0006).
        column.extra("COLLATE \"C\"");
    }
    column
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(MessageCounts::Table)
                .col(customer_key(m, MessageCounts::CustomerId).primary_key())
                .col(big_integer(MessageCounts::Messages))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(AttemptCounts::Table)
                .col(customer_key(m, AttemptCounts::CustomerId))
                .col(big_integer(AttemptCounts::Minute))
                .col(big_integer(AttemptCounts::Writer))
                .col(big_integer(AttemptCounts::Succeeded))
                .col(big_integer(AttemptCounts::Failed))
                .primary_key(
                    Index::create()
                        .col(AttemptCounts::CustomerId)
                        .col(AttemptCounts::Minute)
                        .col(AttemptCounts::Writer),
                )
                .to_owned(),
        )
        .await?;
        // Every customer's minutes (the admin's overview), and the trimming of old ones.
        m.create_index(
            Index::create().name(BY_MINUTE).table(AttemptCounts::Table).col(AttemptCounts::Minute).to_owned(),
        )
        .await?;

        let db = m.get_connection();
        db.execute_unprepared(
            "INSERT INTO message_counts (customer_id, messages) \
             SELECT customer_id, count(*) FROM messages GROUP BY customer_id",
        )
        .await?;
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let since = (now_ms / 60_000 - MINUTES_KEPT) * 60_000;
        db.execute_unprepared(&format!(
            "INSERT INTO attempt_counts (customer_id, minute, writer, succeeded, failed) \
             SELECT customer_id, started_at / 60000, 0, \
               sum(CASE WHEN outcome = 'success' THEN 1 ELSE 0 END), \
               sum(CASE WHEN outcome = 'success' THEN 0 ELSE 1 END) \
             FROM attempts WHERE started_at >= {since} GROUP BY customer_id, started_at / 60000"
        ))
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(AttemptCounts::Table).to_owned()).await?;
        m.drop_table(Table::drop().table(MessageCounts::Table).to_owned()).await
    }
}
