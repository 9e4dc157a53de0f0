use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Facts about the database itself, such as the fingerprint of the key its
/// subscription secrets are sealed with (so a wrong key is refused at start).
#[derive(DeriveIden)]
enum HeraldMeta {
    Table,
    Name,
    Value,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(HeraldMeta::Table)
                .col(string(HeraldMeta::Name).primary_key())
                .col(text(HeraldMeta::Value))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(HeraldMeta::Table).to_owned()).await
    }
}
