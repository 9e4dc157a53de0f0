//! Answers kept for `Idempotency-Key`: one row per caller and key. While the first
//! request runs its row is `running`, held by that request's random `owner` (a repeat
//! answers 409 until `locked_until`); once answered it is `done` with the answer's
//! status, content type and body (sealed, as it may hold a secret), and it is removed
//! 24 h after `created_at`.

use sea_orm_migration::sea_orm::DbBackend;
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum IdempotencyKeys {
    Table,
    Caller,
    Key,
    Fingerprint,
    State,
    Owner,
    LockedUntil,
    Status,
    ContentType,
    Body,
    CreatedAt,
}

const BY_AGE: &str = "idx_idempotency_keys_created_at";

/// Compared byte by byte, as every key is (m0006).
fn key<T: IntoIden>(m: &SchemaManager, name: T) -> ColumnDef {
    let mut column = string(name);
    if m.get_database_backend() == DbBackend::Postgres {
        column.extra("COLLATE \"C\"");
    }
    column
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(IdempotencyKeys::Table)
                .col(key(m, IdempotencyKeys::Caller))
                .col(key(m, IdempotencyKeys::Key))
                .col(string(IdempotencyKeys::Fingerprint))
                .col(string(IdempotencyKeys::State))
                .col(big_integer(IdempotencyKeys::Owner))
                .col(big_integer(IdempotencyKeys::LockedUntil))
                .col(integer_null(IdempotencyKeys::Status))
                .col(string_null(IdempotencyKeys::ContentType))
                .col(text_null(IdempotencyKeys::Body))
                .col(big_integer(IdempotencyKeys::CreatedAt))
                .primary_key(Index::create().col(IdempotencyKeys::Caller).col(IdempotencyKeys::Key))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create().name(BY_AGE).table(IdempotencyKeys::Table).col(IdempotencyKeys::CreatedAt).to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(IdempotencyKeys::Table).to_owned()).await
    }
}
