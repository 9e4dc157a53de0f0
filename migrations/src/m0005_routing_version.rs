//! A customer's routing version: every change to one of its subscriptions
//! (insert, update, delete, by Herald or by hand) adds one to it, in the same
//! transaction. A publish may then route with the subscriptions it read
//! earlier, as long as its write finds the version unchanged.

use sea_orm_migration::sea_orm::DbBackend;
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Customers {
    Table,
    RoutingVersion,
}

const BUMP: &str = "UPDATE customers SET routing_version = routing_version + 1";

fn sqlite_triggers() -> Vec<String> {
    vec![
        format!(
            "CREATE TRIGGER subscriptions_routing_insert AFTER INSERT ON subscriptions \
             BEGIN {BUMP} WHERE id = NEW.customer_id; END"
        ),
        format!(
            "CREATE TRIGGER subscriptions_routing_update AFTER UPDATE ON subscriptions \
             BEGIN {BUMP} WHERE id IN (OLD.customer_id, NEW.customer_id); END"
        ),
        format!(
            "CREATE TRIGGER subscriptions_routing_delete AFTER DELETE ON subscriptions \
             BEGIN {BUMP} WHERE id = OLD.customer_id; END"
        ),
    ]
}

fn postgres_triggers() -> Vec<String> {
    vec![
        format!(
            "CREATE FUNCTION herald_subscriptions_changed() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN \
               IF TG_OP <> 'INSERT' THEN {BUMP} WHERE id = OLD.customer_id; END IF; \
               IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.customer_id IS DISTINCT FROM OLD.customer_id) THEN \
                 {BUMP} WHERE id = NEW.customer_id; \
               END IF; \
               RETURN NULL; \
             END $$"
        ),
        "CREATE TRIGGER subscriptions_routing AFTER INSERT OR UPDATE OR DELETE ON subscriptions \
         FOR EACH ROW EXECUTE FUNCTION herald_subscriptions_changed()"
            .to_string(),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(Customers::Table)
                .add_column(big_integer(Customers::RoutingVersion).default(0))
                .to_owned(),
        )
        .await?;
        let triggers = match m.get_database_backend() {
            DbBackend::Postgres => postgres_triggers(),
            _ => sqlite_triggers(),
        };
        for sql in triggers {
            m.get_connection().execute_unprepared(&sql).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let drops: &[&str] = match m.get_database_backend() {
            DbBackend::Postgres => {
                &["DROP TRIGGER subscriptions_routing ON subscriptions", "DROP FUNCTION herald_subscriptions_changed()"]
            }
            _ => &[
                "DROP TRIGGER subscriptions_routing_insert",
                "DROP TRIGGER subscriptions_routing_update",
                "DROP TRIGGER subscriptions_routing_delete",
            ],
        };
        for sql in drops {
            m.get_connection().execute_unprepared(sql).await?;
        }
        m.alter_table(Table::alter().table(Customers::Table).drop_column(Customers::RoutingVersion).to_owned()).await
    }
}
