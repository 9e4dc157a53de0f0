//! An attempt is named by its message and its number, which were already
//! unique together: the attempt's own id, which nothing reads, is gone, and
//! with it an index that every recorded attempt had to update.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;
use sea_orm_migration::sea_orm::DbBackend;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Attempts {
    Table,
    Id,
    MessageId,
    CustomerId,
    Number,
    StartedAt,
    DurationMs,
    StatusCode,
    ErrorKind,
    ErrorDetail,
    Outcome,
    RequestHeaders,
    ResponseHeaders,
    ResponseBody,
}

/// The columns an attempt keeps, in the table's order.
const KEPT: &str = "message_id, customer_id, number, started_at, duration_ms, status_code, error_kind, \
                    error_detail, outcome, request_headers, response_headers, response_body";

/// The table as [`m0001`](super::m0001_initial) made it, with or without its id, named `name`.
fn table(name: &str, with_id: bool) -> TableCreateStatement {
    let mut table = Table::create();
    table.table(Alias::new(name));
    if with_id {
        table.col(string(Attempts::Id).primary_key());
    }
    table
        .col(string(Attempts::MessageId))
        .col(string(Attempts::CustomerId))
        .col(integer(Attempts::Number))
        .col(big_integer(Attempts::StartedAt))
        .col(big_integer(Attempts::DurationMs))
        .col(integer_null(Attempts::StatusCode))
        .col(string_null(Attempts::ErrorKind))
        .col(text_null(Attempts::ErrorDetail))
        .col(string(Attempts::Outcome))
        .col(text(Attempts::RequestHeaders))
        .col(text(Attempts::ResponseHeaders))
        .col(text_null(Attempts::ResponseBody));
    if !with_id {
        table.primary_key(Index::create().col(Attempts::MessageId).col(Attempts::Number));
    }
    table.to_owned()
}

fn index(name: &str, columns: &[&str]) -> IndexCreateStatement {
    let mut index = Index::create();
    index.name(name).table(Attempts::Table);
    for column in columns {
        index.col(Alias::new(*column));
    }
    index.to_owned()
}

/// SQLite cannot change a table's primary key: the table is written anew, and its indexes with it.
async fn rebuild(m: &SchemaManager<'_>, with_id: bool) -> Result<(), DbErr> {
    let db = m.get_connection();
    m.create_table(table("attempts_rebuilt", with_id)).await?;
    let (columns, values) = match with_id {
        true => (format!("id, {KEPT}"), format!("'att_' || message_id || '_' || number, {KEPT}")),
        false => (KEPT.to_string(), KEPT.to_string()),
    };
    db.execute_unprepared(&format!("INSERT INTO attempts_rebuilt ({columns}) SELECT {values} FROM attempts")).await?;
    m.drop_table(Table::drop().table(Attempts::Table).to_owned()).await?;
    db.execute_unprepared("ALTER TABLE attempts_rebuilt RENAME TO attempts").await?;
    if with_id {
        let unique = index("uq_attempts_message_number", &["message_id", "number"]).unique().to_owned();
        m.create_index(unique).await?;
    }
    m.create_index(index("idx_attempts_started", &["started_at"])).await?;
    m.create_index(index("idx_attempts_customer_started", &["customer_id", "started_at"])).await
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// All or nothing on SQLite too: a rebuild stopped halfway would leave no attempts table.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.get_database_backend() != DbBackend::Postgres {
            return rebuild(m, false).await;
        }
        m.get_connection()
            .execute_unprepared(
                "ALTER TABLE attempts DROP CONSTRAINT attempts_pkey, DROP COLUMN id; \
                 ALTER TABLE attempts ADD CONSTRAINT attempts_pkey PRIMARY KEY USING INDEX uq_attempts_message_number",
            )
            .await?;
        Ok(())
    }

    /// Earlier attempts get ids made of their key (`att_{message}_{number}`).
    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.get_database_backend() != DbBackend::Postgres {
            return rebuild(m, true).await;
        }
        m.get_connection()
            .execute_unprepared(
                "ALTER TABLE attempts DROP CONSTRAINT attempts_pkey, ADD COLUMN id varchar COLLATE \"C\"; \
                 UPDATE attempts SET id = 'att_' || message_id || '_' || number; \
                 ALTER TABLE attempts ALTER COLUMN id SET NOT NULL, ADD CONSTRAINT attempts_pkey PRIMARY KEY (id); \
                 CREATE UNIQUE INDEX uq_attempts_message_number ON attempts (message_id, number)",
            )
            .await?;
        Ok(())
    }
}
