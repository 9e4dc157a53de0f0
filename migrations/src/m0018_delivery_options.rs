//! What a subscription adds to each delivery: extra headers and credentials, each sealed at rest
//! as one value bound to its row (null when there are none), and the signature scheme (`v1`, HMAC
//! with a shared secret; `v1a`, Ed25519, whose secret key then sits in `secret`).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Subscriptions {
    Table,
    Headers,
    Auth,
    Signature,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // One column a statement: SQLite adds no more at once.
        for column in [text_null(Subscriptions::Headers), text_null(Subscriptions::Auth)] {
            m.alter_table(Table::alter().table(Subscriptions::Table).add_column(column).to_owned()).await?;
        }
        let signature = string(Subscriptions::Signature).default("v1").to_owned();
        m.alter_table(Table::alter().table(Subscriptions::Table).add_column(signature).to_owned()).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for column in [Subscriptions::Headers, Subscriptions::Auth, Subscriptions::Signature] {
            m.alter_table(Table::alter().table(Subscriptions::Table).drop_column(column).to_owned()).await?;
        }
        Ok(())
    }
}
