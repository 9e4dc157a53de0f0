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
//! Two indexes keep fewer rows:
//! - the log by customer and state keeps only the messages not delivered,
//!   which are the ones a state filter looks for; a message leaves it when
//!   delivered, and a filter on `delivered` reads the customer's log, nearly all
//!   of which it matches;
//! - an endpoint's open messages keep only those waiting (pending or held):
//!   what locking, unlocking and refilling an endpoint read. A message leased
//!   from the start (handed to the lane at publish) never enters it, and an
//!   ended lease is found through the lanes' indexes.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;
use sea_orm_migration::sea_orm::DbBackend;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// The condition of the customer's log by state, as queries must spell it to use that index.
pub const UNDELIVERED: &str = "state <> 'delivered'";

/// The condition (beyond being open) of an endpoint's waiting messages, likewise.
pub const WAITING: &str = "state <> 'delivering'";

#[derive(DeriveIden)]
enum Events {
    Table,
    MessageIds,
}

/// Open messages: those with a next attempt (m0004).
const OPEN: &str = "next_attempt_at IS NOT NULL";

/// (name, table, columns, conditions) of the indexes this migration drops.
const DROPPED: [(&str, &str, &[&str], &[&str]); 5] = [
    ("idx_messages_event", "messages", &["event_id"], &[]),
    ("idx_messages_due", "messages", &["state", "next_attempt_at"], &[OPEN]),
    ("idx_messages_customer_state", "messages", &["customer_id", "state", "id"], &[]),
    ("idx_messages_endpoint", "messages", &["endpoint_id", "state", "next_attempt_at"], &[OPEN]),
    ("idx_attempts_started", "attempts", &["started_at"], &[]),
];

/// (name, columns, conditions) of the messages' indexes that replace two of them.
const CREATED: [(&str, &[&str], &[&str]); 2] = [
    ("idx_messages_customer_undelivered", &["customer_id", "state", "id"], &[UNDELIVERED]),
    ("idx_messages_endpoint_waiting", &["endpoint_id", "state", "next_attempt_at"], &[OPEN, WAITING]),
];

/// An index; partial when `conditions` holds any, which it then requires all of.
fn create(name: &str, table: &str, columns: &[&str], conditions: &[&'static str]) -> IndexCreateStatement {
    let mut stmt = Index::create();
    stmt.name(name).table(Alias::new(table));
    for column in columns {
        stmt.col(Alias::new(*column));
    }
    for condition in conditions {
        stmt.and_where(Expr::cust(*condition));
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
        for (name, table, _, _) in DROPPED {
            m.drop_index(drop(name, table)).await?;
        }
        for (name, columns, conditions) in CREATED {
            m.create_index(create(name, "messages", columns, conditions)).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for (name, _, _) in CREATED {
            m.drop_index(drop(name, "messages")).await?;
        }
        for (name, table, columns, conditions) in DROPPED {
            m.create_index(create(name, table, columns, conditions)).await?;
        }
        let remove = Table::alter().table(Events::Table).drop_column(Events::MessageIds).to_owned();
        m.alter_table(remove).await
    }
}
