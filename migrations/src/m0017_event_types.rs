//! The event-type catalog: each customer's types, with an optional description,
//! a JSON Schema (draft 2020-12) for the events' `data`, and an example that
//! validates against it. A type's name is unique per customer; the catalog is
//! listed newest first by id, as every list is.

use sea_orm_migration::sea_orm::DbBackend;
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum EventTypes {
    Table,
    Id,
    CustomerId,
    Name,
    Description,
    Schema,
    Example,
    CreatedAt,
    UpdatedAt,
}

const BY_NAME: &str = "idx_event_types_name";

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
                .table(EventTypes::Table)
                .col(key(m, EventTypes::Id).primary_key())
                .col(key(m, EventTypes::CustomerId))
                .col(key(m, EventTypes::Name))
                .col(text_null(EventTypes::Description))
                .col(text_null(EventTypes::Schema))
                .col(text_null(EventTypes::Example))
                .col(big_integer(EventTypes::CreatedAt))
                .col(big_integer(EventTypes::UpdatedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name(BY_NAME)
                .table(EventTypes::Table)
                .col(EventTypes::CustomerId)
                .col(EventTypes::Name)
                .unique()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(EventTypes::Table).to_owned()).await
    }
}
