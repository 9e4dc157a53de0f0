//! Where each replay's series of attempts began: the message's attempt count at each replay,
//! comma-separated (`,3,7`), appended by the replay itself. The delivery path never reads or
//! writes it; the message page groups the attempts by it. Messages replayed before this
//! migration know only their latest series' start (`attempt_base`).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Messages {
    Table,
    SeriesStarts,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let column = string(Messages::SeriesStarts).default("").to_owned();
        m.alter_table(Table::alter().table(Messages::Table).add_column(column).to_owned()).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(Messages::Table).drop_column(Messages::SeriesStarts).to_owned()).await
    }
}
