//! The only code that touches SeaORM. Functions take `&impl ConnectionTrait` so
//! that a service can compose several of them in one transaction.

pub mod api_keys;
pub mod attempts;
pub mod audit;
pub mod checkpoint;
pub mod customers;
pub mod endpoints;
pub mod entities;
pub mod events;
pub mod messages;
pub mod meta;
pub mod nodelay;
pub mod notify;
pub mod page;
pub mod recordset;
pub mod sessions;
pub mod subscriptions;
pub mod users;
pub mod writers;

use std::time::Duration;

use migrations::{Migrator, MigratorTrait};
use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{ConnectOptions, Database, DatabaseConnection, DbBackend, DbErr, SqlErr};

/// A pooled PostgreSQL connection idle this long is pinged before it is used,
/// in case the server or something between dropped it meanwhile.
const PING_IF_IDLE_FOR: Duration = Duration::from_secs(10);

/// Opens the database named by `url`. SQLite runs in WAL mode with one writer
/// connection; PostgreSQL gets a small pool. A connection is not pinged every
/// time it is taken from the pool (sqlx's default): that doubled the round
/// trips of every short statement.
pub async fn connect(url: &str) -> Result<DatabaseConnection, DbErr> {
    let mut options = ConnectOptions::new(url.to_string());
    options.sqlx_logging(false).acquire_timeout(Duration::from_secs(30));
    if url.starts_with("sqlite:") {
        options.max_connections(1).test_before_acquire(false).map_sqlx_sqlite_opts(|opts| {
            opts.journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(10))
                .foreign_keys(true)
                // 16 MiB of pages in memory: enough for the hot index pages. A larger cache made
                // every commit slower (SQLite walks the cache at the end of each write), and a
                // memory map made the whole file count as Herald's memory.
                .pragma("cache_size", "-16384")
                .pragma("mmap_size", "0")
                .pragma("temp_store", "memory")
                // Checkpoints run on a connection of their own (see `checkpoint`).
                .pragma("wal_autocheckpoint", checkpoint::WRITER_BACKSTOP_PAGES)
        });
    } else {
        options.max_connections(16).min_connections(1).test_before_acquire_if_idle_for(PING_IF_IDLE_FOR);
        let port = url::Url::parse(url).ok().and_then(|u| u.port()).unwrap_or(5432);
        options.map_sqlx_postgres_pool_opts(move |pool| {
            pool.after_connect(move |_, _| {
                nodelay::set_on_sockets_to(port);
                Box::pin(async { Ok(()) })
            })
        });
    }
    Database::connect(options).await
}

pub async fn migrate(db: &DatabaseConnection) -> Result<(), DbErr> {
    Migrator::up(db, None).await
}

/// Makes the rest of a PostgreSQL transaction plan each statement for the
/// tables as they are then. A cached generic plan is made once, perhaps while
/// the messages table was nearly empty (a fresh database before its first
/// ANALYZE), and would go on scanning it whole as it grows: for the statements
/// that find messages among many, that costs far more than planning.
pub const PLAN_EACH_TIME: &str = "SET LOCAL plan_cache_mode = force_custom_plan";

pub fn is_unique_violation(err: &DbErr) -> bool {
    matches!(err.sql_err(), Some(SqlErr::UniqueConstraintViolation(_)))
}

pub fn is_postgres(db: &DatabaseConnection) -> bool {
    db.get_database_backend() == DbBackend::Postgres
}
