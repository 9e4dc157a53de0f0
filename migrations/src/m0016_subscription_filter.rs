//! A subscription's filter: a CEL expression over the event that must be true
//! for the event to reach the subscription. Null for a subscription without one.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Subscriptions {
    Table,
    Filter,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter().table(Subscriptions::Table).add_column(text_null(Subscriptions::Filter)).to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(Subscriptions::Table).drop_column(Subscriptions::Filter).to_owned()).await
    }
}
