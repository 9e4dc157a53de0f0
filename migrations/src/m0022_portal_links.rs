//! Customer portal links: one row per link, found by the SHA-256 of its token (the token
//! itself is never stored). `used_at` is set by the one request that opens it; a link is
//! removed a day after `expires_at`.

use sea_orm_migration::sea_orm::DbBackend;
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum PortalLinks {
    Table,
    Id,
    TokenHash,
    CustomerId,
    Role,
    ReturnUrl,
    TtlSecs,
    ExpiresAt,
    UsedAt,
    CreatedAt,
}

const BY_TOKEN: &str = "idx_portal_links_token_hash";
const BY_EXPIRY: &str = "idx_portal_links_expires_at";

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
                .table(PortalLinks::Table)
                .col(key(m, PortalLinks::Id).primary_key())
                .col(key(m, PortalLinks::TokenHash))
                .col(key(m, PortalLinks::CustomerId))
                .col(string(PortalLinks::Role))
                .col(string_null(PortalLinks::ReturnUrl))
                .col(big_integer(PortalLinks::TtlSecs))
                .col(big_integer(PortalLinks::ExpiresAt))
                .col(big_integer_null(PortalLinks::UsedAt))
                .col(big_integer(PortalLinks::CreatedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create().name(BY_TOKEN).table(PortalLinks::Table).col(PortalLinks::TokenHash).unique().to_owned(),
        )
        .await?;
        m.create_index(Index::create().name(BY_EXPIRY).table(PortalLinks::Table).col(PortalLinks::ExpiresAt).to_owned())
            .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(PortalLinks::Table).to_owned()).await
    }
}
