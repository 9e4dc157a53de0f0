//! The worker's indexes hold only open messages: those with a next attempt
//! (pending, delivering, held). A delivered or dead message leaves them for
//! good instead of moving within them, so finishing an attempt writes less and
//! a claim never reads past the delivered history. Queries that use them say
//! `next_attempt_at IS NOT NULL` or compare it, so the planners may.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// (name, columns before, columns after) of the indexes made partial. The
/// endpoint's also gains the next attempt, so that its due messages are one range.
const PARTIAL: [(&str, &[&str], &[&str]); 3] = [
    ("idx_messages_due", &["state", "next_attempt_at"], &["state", "next_attempt_at"]),
    (
        "idx_messages_fresh",
        &["state", "attempt_count", "next_attempt_at"],
        &["state", "attempt_count", "next_attempt_at"],
    ),
    ("idx_messages_endpoint", &["endpoint_id", "state"], &["endpoint_id", "state", "next_attempt_at"]),
];

fn create(name: &str, columns: &[&str], partial: bool) -> IndexCreateStatement {
    let mut stmt = Index::create();
    stmt.name(name).table(Alias::new("messages"));
    for column in columns {
        stmt.col(Alias::new(*column));
    }
    if partial {
        stmt.and_where(Expr::col(Alias::new("next_attempt_at")).is_not_null());
    }
    stmt
}

async fn replace(m: &SchemaManager<'_>, name: &str, columns: &[&str], partial: bool) -> Result<(), DbErr> {
    m.drop_index(Index::drop().name(name).table(Alias::new("messages")).to_owned()).await?;
    m.create_index(create(name, columns, partial)).await
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for (name, _, columns) in PARTIAL {
            replace(m, name, columns, true).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for (name, columns, _) in PARTIAL {
            replace(m, name, columns, false).await?;
        }
        Ok(())
    }
}
