//! The worker's indexes hold only open messages: those with a next attempt
//! (pending, delivering, held). A delivered or dead message leaves them for
//! good instead of moving within them, so finishing an attempt writes less and
//! a claim never reads past the delivered history. First attempts and retries
//! have an index each, so that neither lane's claim reads past the other's
//! messages (a retry backlog scheduled for tomorrow, or a burst of fresh
//! messages). Queries that use them say `next_attempt_at IS NOT NULL` or compare
//! it, and spell the attempt count as the same literal (`attempt_count = 0`,
//! `attempt_count > 0`), so that PostgreSQL's generic plans may use them too.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Open messages: those with a next attempt (pending, delivering, held).
pub const OPEN: &str = "next_attempt_at IS NOT NULL";
pub const FRESH: &str = "attempt_count = 0";
pub const RETRY: &str = "attempt_count > 0";

/// (name, columns, the condition beyond being open) of the worker's indexes.
const PARTIAL: [(&str, &[&str], Option<&str>); 4] = [
    ("idx_messages_due", &["state", "next_attempt_at"], None),
    ("idx_messages_fresh", &["state", "next_attempt_at"], Some(FRESH)),
    ("idx_messages_retry", &["state", "next_attempt_at"], Some(RETRY)),
    ("idx_messages_endpoint", &["endpoint_id", "state", "next_attempt_at"], None),
];

/// The full indexes they replace (name, columns); `idx_messages_retry` is new.
const FULL: [(&str, &[&str]); 3] = [
    ("idx_messages_due", &["state", "next_attempt_at"]),
    ("idx_messages_fresh", &["state", "attempt_count", "next_attempt_at"]),
    ("idx_messages_endpoint", &["endpoint_id", "state"]),
];

/// A full index, or with `condition` a partial one.
fn create(name: &str, columns: &[&str], condition: Option<String>) -> IndexCreateStatement {
    let mut stmt = Index::create();
    stmt.name(name).table(Alias::new("messages"));
    for column in columns {
        stmt.col(Alias::new(*column));
    }
    if let Some(condition) = condition {
        stmt.and_where(Expr::cust(condition));
    }
    stmt
}

/// Open messages, and those of one lane when `extra` names it.
fn open(extra: Option<&str>) -> String {
    match extra {
        Some(extra) => format!("{OPEN} AND {extra}"),
        None => OPEN.to_string(),
    }
}

fn drop(name: &str) -> IndexDropStatement {
    Index::drop().name(name).table(Alias::new("messages")).to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for (name, _) in FULL {
            m.drop_index(drop(name)).await?;
        }
        for (name, columns, extra) in PARTIAL {
            m.create_index(create(name, columns, Some(open(extra)))).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for (name, _, _) in PARTIAL {
            m.drop_index(drop(name)).await?;
        }
        for (name, columns) in FULL {
            m.create_index(create(name, columns, None)).await?;
        }
        Ok(())
    }
}
