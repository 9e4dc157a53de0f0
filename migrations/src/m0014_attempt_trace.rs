//! The W3C trace an attempt's request carried (`traceparent`): the event's own
//! trace when it was published with one, else a trace of its message's. Null
//! on attempts recorded before this migration.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Attempts {
    Table,
    TraceId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(Attempts::Table).add_column(string_null(Attempts::TraceId)).to_owned()).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(Attempts::Table).drop_column(Attempts::TraceId).to_owned()).await
    }
}
