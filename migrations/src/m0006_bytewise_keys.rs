//! On PostgreSQL, the text that Herald's indexes hold compares byte by byte
//! (`COLLATE "C"`), as it always has on SQLite. Ids, states, event keys, URLs
//! and names are identifiers: their order needs no language's rules, while a
//! database created with one (`en_US.UTF-8`, even `C.UTF-8`) applies them at
//! every comparison of every index insert, several per delivery. Equality is
//! the same under both, so every unique constraint holds as before. The
//! columns' indexes are rebuilt once, when this migration runs.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Every text column that one of Herald's indexes holds, by table, with its type.
const INDEXED_TEXT: &[(&str, &[(&str, &str)])] = &[
    ("api_keys", &[("id", "varchar"), ("customer_id", "varchar"), ("token_hash", "varchar")]),
    ("attempts", &[("id", "varchar"), ("message_id", "varchar"), ("customer_id", "varchar")]),
    ("audit_log", &[("id", "varchar")]),
    ("customers", &[("id", "varchar")]),
    ("endpoints", &[("id", "varchar"), ("customer_id", "varchar"), ("url", "text")]),
    ("events", &[("id", "varchar"), ("customer_id", "varchar"), ("source", "text"), ("ce_id", "text")]),
    ("herald_meta", &[("name", "varchar")]),
    (
        "messages",
        &[
            ("id", "varchar"),
            ("customer_id", "varchar"),
            ("event_id", "varchar"),
            ("subscription_id", "varchar"),
            ("endpoint_id", "varchar"),
            ("state", "varchar"),
        ],
    ),
    ("sessions", &[("id_hash", "varchar")]),
    ("subscriptions", &[("id", "varchar"), ("customer_id", "varchar")]),
    ("users", &[("id", "varchar"), ("username", "varchar")]),
];

/// One statement per table, so that each index is rebuilt once.
fn collate(collation: &str) -> Vec<String> {
    INDEXED_TEXT
        .iter()
        .map(|(table, columns)| {
            let alters: Vec<String> = columns
                .iter()
                .map(|(column, ty)| format!("ALTER COLUMN {column} TYPE {ty} COLLATE \"{collation}\""))
                .collect();
            format!("ALTER TABLE {table} {}", alters.join(", "))
        })
        .collect()
}

async fn run(m: &SchemaManager<'_>, statements: Vec<String>) -> Result<(), DbErr> {
    // SQLite compares text as bytes unless told otherwise.
    if m.get_database_backend() != DbBackend::Postgres {
        return Ok(());
    }
    for sql in statements {
        m.get_connection().execute_unprepared(&sql).await?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        run(m, collate("C")).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        run(m, collate("default")).await
    }
}
