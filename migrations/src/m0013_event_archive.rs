//! The event archive's reads: a customer's events newest first (and by time,
//! ids being ULIDs that begin with their publish time) from
//! `idx_events_customer`; an event by its CloudEvent id, with or without its
//! source, from the unique key, whose columns are reordered to (customer, id,
//! source) for that. Uniqueness is the same set of columns as before.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Events {
    Table,
    Id,
    CustomerId,
    Source,
    CeId,
}

const BY_CUSTOMER: &str = "idx_events_customer";
const OLD_KEY: &str = "uq_events_customer_source_id";
const NEW_KEY: &str = "uq_events_customer_id_source";

fn key(name: &str, columns: [Events; 3]) -> IndexCreateStatement {
    let mut index = Index::create();
    index.name(name).table(Events::Table).unique();
    for column in columns {
        index.col(column);
    }
    index.to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_index(
            Index::create().name(BY_CUSTOMER).table(Events::Table).col(Events::CustomerId).col(Events::Id).to_owned(),
        )
        .await?;
        m.create_index(key(NEW_KEY, [Events::CustomerId, Events::CeId, Events::Source])).await?;
        m.drop_index(Index::drop().name(OLD_KEY).table(Events::Table).to_owned()).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_index(key(OLD_KEY, [Events::CustomerId, Events::Source, Events::CeId])).await?;
        m.drop_index(Index::drop().name(NEW_KEY).table(Events::Table).to_owned()).await?;
        m.drop_index(Index::drop().name(BY_CUSTOMER).table(Events::Table).to_owned()).await
    }
}
