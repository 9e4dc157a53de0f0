//! `herald backup`: a consistent copy of a SQLite database while Herald serves
//! it. `VACUUM INTO` reads the database in one read transaction, a snapshot
//! that holds every commit made before it began and none after, and writes it
//! compacted to a new file. In WAL mode a reader never blocks the writer, so
//! publishing and delivery go on meanwhile.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqliteSynchronous};
use sea_orm::sqlx::{ConnectOptions, Connection};

use crate::config::Settings;

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error(
        "herald backup copies a SQLite database; this one is PostgreSQL: back it up with pg_dump \
         (for example `pg_dump --format=custom --file=herald.dump DBNAME`)"
    )]
    Postgres,
    #[error("the database is in memory; there is no file to copy")]
    InMemory,
    #[error("{0} exists; herald backup never overwrites a file: choose a new path")]
    Exists(PathBuf),
    #[error("{path}: {message}")]
    Copy { path: PathBuf, message: String },
}

/// Where the copy may go: the checks that need no database.
pub fn check(settings: &Settings, target: &Path) -> Result<(), BackupError> {
    if !settings.database_url.starts_with("sqlite:") {
        return Err(BackupError::Postgres);
    }
    if settings.sqlite_file().is_none() {
        return Err(BackupError::InMemory);
    }
    if target.symlink_metadata().is_ok() {
        return Err(BackupError::Exists(target.to_path_buf()));
    }
    Ok(())
}

/// Writes a consistent copy of the SQLite database at `database_url` to
/// `target`, flushed to disk before it returns; returns its size in bytes.
pub async fn copy_sqlite(settings: &Settings, target: &Path) -> Result<u64, BackupError> {
    check(settings, target)?;
    let database_url = &settings.database_url;
    let fail = |message: String| BackupError::Copy { path: target.to_path_buf(), message };
    let options = SqliteConnectOptions::from_str(database_url)
        .map_err(|e| fail(e.to_string()))?
        .create_if_missing(false)
        // The copy is written with this connection's setting: flushed before VACUUM INTO returns.
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(Duration::from_secs(30));
    let mut conn = options.connect().await.map_err(|e| fail(format!("cannot open the database: {e}")))?;
    let text = target.to_str().ok_or_else(|| fail("the path is not valid UTF-8".into()))?;
    let copied = sea_orm::sqlx::query("VACUUM INTO ?").bind(text).execute(&mut conn).await;
    let _ = conn.close().await;
    copied.map_err(|e| fail(e.to_string()))?;
    // The copy's entry in its directory survives a power loss too.
    let flushed = std::fs::File::open(target).and_then(|file| {
        file.sync_all()?;
        let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::File::open(dir)?.sync_all()?;
        file.metadata()
    });
    flushed.map(|meta| meta.len()).map_err(|e| fail(format!("cannot flush the copy: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(url: &str) -> Settings {
        Settings { database_url: url.into(), ..Settings::default() }
    }

    #[test]
    fn a_backup_refuses_postgres_memory_and_an_existing_path() {
        let fresh = std::env::temp_dir().join(format!("herald-backup-{}.db", crate::ids::new_id("t")));
        assert!(matches!(check(&on("postgres://db/herald"), &fresh), Err(BackupError::Postgres)));
        assert!(BackupError::Postgres.to_string().contains("pg_dump"));
        assert!(matches!(check(&on("sqlite::memory:"), &fresh), Err(BackupError::InMemory)));
        let existing = std::env::temp_dir();
        assert!(matches!(check(&on("sqlite://herald.db?mode=rwc"), &existing), Err(BackupError::Exists(_))));
        assert!(check(&on("sqlite://herald.db?mode=rwc"), &fresh).is_ok());
    }

    #[tokio::test]
    async fn the_copy_holds_what_was_committed_and_opens() {
        let dir = std::env::temp_dir().join(format!("herald-backup-{}", crate::ids::new_id("t")));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.join("herald.db").display());
        let db = crate::store::connect(&url, crate::config::SqliteSynchronous::Full).await.unwrap();
        crate::store::migrate(&db).await.unwrap();
        let customer =
            crate::store::entities::customer::Model { id: "cus_kept".into(), name: "kept".into(), created_at: 1 };
        crate::store::customers::insert(&db, customer).await.unwrap();

        let target = dir.join("copy.db");
        assert!(copy_sqlite(&on(&url), &target).await.unwrap() > 0);
        assert!(matches!(copy_sqlite(&on(&url), &target).await, Err(BackupError::Exists(_))), "never overwrites");
        let copy =
            crate::store::connect(&format!("sqlite://{}", target.display()), crate::config::SqliteSynchronous::Full)
                .await
                .unwrap();
        assert!(crate::store::customers::get(&copy, &"cus_kept".into()).await.unwrap().is_some());
        drop((db, copy));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
