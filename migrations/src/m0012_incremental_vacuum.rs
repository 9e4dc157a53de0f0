//! SQLite gives the pages that retention frees back to the file system: the
//! database runs with `auto_vacuum = INCREMENTAL`, and the sweeper hands free
//! pages back after each sweep. A new file is created that way by Herald's
//! connection settings; an older one is converted here, by a VACUUM that
//! rewrites the file once (it takes as long as copying the database).
//! PostgreSQL reuses freed space by its own vacuum: nothing to do.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{DbBackend, Statement};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// `PRAGMA auto_vacuum`'s value for incremental.
const INCREMENTAL: i64 = 2;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// VACUUM cannot run inside a transaction.
    fn use_transaction(&self) -> Option<bool> {
        Some(false)
    }

    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.get_database_backend() != DbBackend::Sqlite {
            return Ok(());
        }
        let db = m.get_connection();
        let mode = db
            .query_one_raw(Statement::from_string(DbBackend::Sqlite, "PRAGMA auto_vacuum"))
            .await?
            .map(|row| row.try_get_by_index::<i64>(0))
            .transpose()?;
        if mode != Some(INCREMENTAL) {
            db.execute_unprepared("PRAGMA auto_vacuum = INCREMENTAL").await?;
            db.execute_unprepared("VACUUM").await?;
        }
        Ok(())
    }

    async fn down(&self, _m: &SchemaManager) -> Result<(), DbErr> {
        Ok(())
    }
}
