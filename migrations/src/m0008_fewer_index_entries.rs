//! Fewer index entries per delivery. Every entry that storing a message, its
//! move to `delivered` and its attempt add is work on the hot path (on
//! PostgreSQL, about 3 µs of the server's CPU each), so the indexes that
//! served only rare reads go, and those reads are answered another way:
//! - an event's messages, read only to answer a repeated publish: the event
//!   row lists its message ids;
//! - every open message by state and time (lease recovery, expiry): each lane's
//!   own index answers for its messages;
//! - all attempts by time (the admin's overview): the per-customer index is
//!   read once per customer.
//!
//! The log by customer and state keeps only the messages not delivered, which
//! are the ones a state filter looks for; a message leaves it when delivered,
//! and a filter on `delivered` reads the customer's log, nearly all of which
//! it matches.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;
use sea_orm_migration::sea_orm::DbBackend;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// The condition of the customer's log by state, as queries must spell it to use that index.
pub const UNDELIVERED: &str = "state <> 'delivered'";

#[derive(DeriveIden)]
enum Events {
    Table,
    MessageIds,
}

/// (name, table, columns) of the indexes this migration drops.
const DROPPED: [(&str, &str, &[&str]); 4] = [
    ("idx_messages_event", "messages", &["event_id"]),
    ("idx_messages_due", "messages", &["state", "next_attempt_at"]),
    ("idx_messages_customer_state", "messages", &["customer_id", "state", "id"]),
    ("idx_attempts_started", "attempts", &["started_at"]),
];

const BY_STATE: &str = "idx_messages_customer_undelivered";

/// `idx_messages_due` held open messages only (m0004).
fn condition_of(name: &str) -> Option<&'static str> {
    (name == "idx_messages_due").then_some("next_attempt_at IS NOT NULL")
}

fn create(name: &str, table: &str, columns: &[&str], condition: Option<&'static str>) -> IndexCreateStatement {
    let mut stmt = Index::create();
    stmt.name(name).table(Alias::new(table));
    for column in columns {
        stmt.col(Alias::new(*column));
    }
    if let Some(condition) = condition {
        stmt.and_where(Expr::cust(condition));
    }
    stmt
}

fn drop(name: &str, table: &str) -> IndexDropStatement {
    Index::drop().name(name).table(Alias::new(table)).to_owned()
}

/// Each event's message ids, in id order, comma-separated.
fn backfill(backend: DbBackend) -> &'static str {
    match backend {
        DbBackend::Postgres => {
            "UPDATE events SET message_ids = m.ids \
             FROM (SELECT event_id, string_agg(id, ',' ORDER BY id) AS ids FROM messages GROUP BY event_id) AS m \
             WHERE m.event_id = events.id"
        }
        _ => {
            "UPDATE events SET message_ids = m.ids \
             FROM (SELECT event_id, group_concat(id, ',') AS ids \
                   FROM (SELECT event_id, id FROM messages ORDER BY event_id, id) GROUP BY event_id) AS m \
             WHERE m.event_id = events.id"
        }
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let add = Table::alter().table(Events::Table).add_column(text(Events::MessageIds).default("")).to_owned();
        m.alter_table(add).await?;
        m.get_connection().execute_unprepared(backfill(m.get_database_backend())).await?;
        for (name, table, _) in DROPPED {
            m.drop_index(drop(name, table)).await?;
        }
        m.create_index(create(BY_STATE, "messages", &["customer_id", "state", "id"], Some(UNDELIVERED))).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_index(drop(BY_STATE, "messages")).await?;
        for (name, table, columns) in DROPPED {
            m.create_index(create(name, table, columns, condition_of(name))).await?;
        }
        let remove = Table::alter().table(Events::Table).drop_column(Events::MessageIds).to_owned();
        m.alter_table(remove).await
    }
}
