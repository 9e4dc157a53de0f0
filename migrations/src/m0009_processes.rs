//! The serving processes of a shared (PostgreSQL) database, each with the time
//! of its last heartbeat. A process's number is the upper half of every lease
//! token it draws, so the leases of a process that fell silent can be found and
//! taken back by the others.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum HeraldProcesses {
    Table,
    Number,
    Host,
    StartedAt,
    HeartbeatAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(HeraldProcesses::Table)
                .col(pk_auto(HeraldProcesses::Number))
                .col(text(HeraldProcesses::Host))
                .col(big_integer(HeraldProcesses::StartedAt))
                .col(big_integer(HeraldProcesses::HeartbeatAt))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(HeraldProcesses::Table).to_owned()).await
    }
}
