//! When a message's series of attempts first failed: every retry of the
//! series is due at that time plus the policy's offset for it, so slow
//! attempts do not push the schedule later. Null until the first failure;
//! rows from before this migration keep the earlier rule (each retry from the
//! end of the attempt before it).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Messages {
    Table,
    FirstFailedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter().table(Messages::Table).add_column(big_integer_null(Messages::FirstFailedAt)).to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(Messages::Table).drop_column(Messages::FirstFailedAt).to_owned()).await
    }
}
