use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Dashboard sessions. The id is stored only as a hash: a copy of the database
/// does not let anyone take over a session.
#[derive(DeriveIden)]
enum Sessions {
    Table,
    IdHash,
    Data,
    ExpiresAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(Sessions::Table)
                .col(string(Sessions::IdHash).primary_key())
                .col(text(Sessions::Data))
                .col(big_integer(Sessions::ExpiresAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create().name("idx_sessions_expires").table(Sessions::Table).col(Sessions::ExpiresAt).to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(Sessions::Table).to_owned()).await
    }
}
