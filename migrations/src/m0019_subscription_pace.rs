//! A subscription's pace: at most this many attempts a second to its endpoint (null: none).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Subscriptions {
    Table,
    RateLimitPerSec,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let column = integer_null(Subscriptions::RateLimitPerSec);
        m.alter_table(Table::alter().table(Subscriptions::Table).add_column(column).to_owned()).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let table = Table::alter().table(Subscriptions::Table).drop_column(Subscriptions::RateLimitPerSec).to_owned();
        m.alter_table(table).await
    }
}
