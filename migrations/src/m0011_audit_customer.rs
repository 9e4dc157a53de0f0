//! The customer an audit row concerns, so that a customer's key can read its
//! own rows; null for changes that concern no one customer (an admin's bulk
//! replay across customers, an admin user).

use sea_orm_migration::sea_orm::DbBackend;
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum AuditLog {
    Table,
    Id,
    CustomerId,
}

const INDEX: &str = "idx_audit_log_customer";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let mut column = text_null(AuditLog::CustomerId);
        if m.get_database_backend() == DbBackend::Postgres {
            // Compared byte by byte, as every key is (m0006).
            column.extra("COLLATE \"C\"");
        }
        m.alter_table(Table::alter().table(AuditLog::Table).add_column(column).to_owned()).await?;
        m.create_index(
            Index::create().name(INDEX).table(AuditLog::Table).col(AuditLog::CustomerId).col(AuditLog::Id).to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_index(Index::drop().name(INDEX).table(AuditLog::Table).to_owned()).await?;
        m.alter_table(Table::alter().table(AuditLog::Table).drop_column(AuditLog::CustomerId).to_owned()).await
    }
}
