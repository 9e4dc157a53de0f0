//! Replays as durable jobs. A job selects events (a window replayed to a subscription) or dead
//! messages (a bulk replay) and works through them in id order, a batch per transaction that
//! also moves its `cursor` (the last id done) and its count `replayed`, so that a job resumed
//! after a crash starts exactly where it stopped. A process works on a job while it holds its
//! lease (`lease_token` until `lease_until`), renewed at each batch.

use sea_orm_migration::sea_orm::DbBackend;
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Replays {
    Table,
    Id,
    CustomerId,
    Kind,
    State,
    Request,
    Replayed,
    Cursor,
    LeaseToken,
    LeaseUntil,
    CreatedAt,
    UpdatedAt,
    FinishedAt,
}

const BY_STATE: &str = "idx_replays_state";

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
        let mut customer = string_null(Replays::CustomerId);
        let mut cursor = string_null(Replays::Cursor);
        if m.get_database_backend() == DbBackend::Postgres {
            customer.extra("COLLATE \"C\"");
            cursor.extra("COLLATE \"C\"");
        }
        m.create_table(
            Table::create()
                .table(Replays::Table)
                .col(key(m, Replays::Id).primary_key())
                .col(customer)
                .col(string(Replays::Kind))
                .col(key(m, Replays::State))
                .col(text(Replays::Request))
                .col(big_integer(Replays::Replayed))
                .col(cursor)
                .col(big_integer_null(Replays::LeaseToken))
                .col(big_integer(Replays::LeaseUntil))
                .col(big_integer(Replays::CreatedAt))
                .col(big_integer(Replays::UpdatedAt))
                .col(big_integer_null(Replays::FinishedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name(BY_STATE)
                .table(Replays::Table)
                .col(Replays::State)
                .col(Replays::LeaseUntil)
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(Replays::Table).to_owned()).await
    }
}
