//! The only code that touches SeaORM. Functions take `&impl ConnectionTrait` so
//! that a service can compose several of them in one transaction.

pub mod api_keys;
pub mod attempts;
pub mod audit;
pub mod backup;
pub mod bulk;
pub mod checkpoint;
pub mod counts;
pub mod customers;
pub mod endpoint_health;
pub mod endpoints;
pub mod entities;
pub mod event_types;
pub mod events;
pub mod health;
pub mod idempotency_keys;
pub mod messages;
pub mod meta;
pub mod nodelay;
pub mod notify;
pub mod owner;
pub mod page;
pub mod portal_links;
pub mod processes;
pub mod recordset;
pub mod replays;
pub mod retention;
pub mod sessions;
pub mod sqlite_direct;
pub mod sqlite_memory;
pub mod subscriptions;
pub mod users;
pub mod wal_flush;

use std::time::Duration;

use migrations::{Migrator, MigratorTrait};
use sea_orm::sqlx::postgres::PgSslMode;
use sea_orm::sqlx::sqlite::{self, SqliteAutoVacuum, SqliteJournalMode};
use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, DbErr, SqlErr, Statement};

use crate::config::SqliteSynchronous;

/// A pooled PostgreSQL connection idle this long is pinged before it is used,
/// in case the server or something between dropped it meanwhile.
const PING_IF_IDLE_FOR: Duration = Duration::from_secs(10);

/// The longest a statement waits for a PostgreSQL connection, a new one's
/// connecting included. A server that does not answer within it is reported
/// unavailable (see [`health`]), so that an API request answers 503 within two
/// seconds instead of hanging for as long as the server is away.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(1);

/// The longest a statement waits for SQLite's one connection. The wait is a
/// queue behind Herald's own statements (the flushes that make answers durable
/// run off the connection, see [`wal_flush`]), which a machine busy with other
/// work can stretch past a second with nothing wrong: a virtual machine whose
/// cores are taken for a moment, writes held back while the kernel writes out
/// much else. SQLite reports its own faults at once (a full disk, a read-only
/// file, an I/O error); this deadline is for a statement stuck in the disk, or
/// a lock another process holds on the file.
pub const SQLITE_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a statement waits for a connection of `backend`.
pub fn acquire_timeout(backend: DbBackend) -> Duration {
    if backend == DbBackend::Sqlite { SQLITE_ACQUIRE_TIMEOUT } else { ACQUIRE_TIMEOUT }
}

/// Rows a SQLite statement hands over before waiting for them to be read.
const SQLITE_ROW_BUFFER: usize = 1024;

/// Opens the database named by `url`. SQLite runs in WAL mode with one writer
/// connection, flushing each commit as `synchronous` says; PostgreSQL gets a
/// small pool and keeps its own setting (`synchronous_commit = on` unless an
/// operator changed it; only claims turn it off, see [`messages::claim`]). A
/// connection is not pinged every time it is taken from the pool (sqlx's
/// default): that doubled the round trips of every short statement. One idle
/// for a while is pinged, and one that failed is closed when it comes back to
/// the pool (sqlx tests it then), so after an outage the pool refills with
/// fresh connections.
pub async fn connect(url: &str, synchronous: SqliteSynchronous) -> Result<DatabaseConnection, DbErr> {
    let mut options = ConnectOptions::new(url.to_string());
    let sqlite = url.starts_with("sqlite:");
    let backend = if sqlite { DbBackend::Sqlite } else { DbBackend::Postgres };
    options.sqlx_logging(false).acquire_timeout(acquire_timeout(backend));
    if sqlite {
        options.max_connections(1).test_before_acquire(false).map_sqlx_sqlite_opts(move |opts| {
            // FULL flushes the write-ahead log at every commit: each group commit of publishes
            // (or attempts, or a claim) is one flush, made before any of its requests is answered.
            let synchronous = match synchronous {
                SqliteSynchronous::Full => sqlite::SqliteSynchronous::Full,
                SqliteSynchronous::Normal => sqlite::SqliteSynchronous::Normal,
            };
            opts.journal_mode(SqliteJournalMode::Wal)
                // Retention's sweeper gives freed pages back (a new file only; m0012 converts an older one).
                .auto_vacuum(SqliteAutoVacuum::Incremental)
                .synchronous(synchronous)
                .busy_timeout(Duration::from_secs(10))
                // A batch's RETURNING rows (a claim's, a publish's) fit in the channel from
                // SQLite's thread, which would otherwise stop at every row beyond sqlx's 50
                // until this side took one.
                .row_buffer_size(SQLITE_ROW_BUFFER)
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
        let parsed = url::Url::parse(url).ok();
        let port = parsed.as_ref().and_then(|u| u.port()).unwrap_or(5432);
        if parsed.as_ref().is_some_and(plain_on_loopback) {
            options.map_sqlx_postgres_opts(|opts| opts.ssl_mode(PgSslMode::Disable));
        }
        options.map_sqlx_postgres_pool_opts(move |pool| {
            pool.after_connect(move |_, _| {
                nodelay::set_on_sockets_to(port);
                Box::pin(async { Ok(()) })
            })
        });
    }
    Database::connect(options).await
}

/// How long Herald waits at start for a database that does not answer yet: a
/// PostgreSQL server still starting beside it, a SQLite file on a disk busy
/// enough that opening it takes longer than a request waits ([`acquire_timeout`]).
pub const START_PATIENCE: Duration = Duration::from_secs(30);

/// Opens the database at start: as [`connect_patiently`] with
/// [`START_PATIENCE`], saying once in the log that it waits.
pub async fn connect_at_start(url: &str, synchronous: SqliteSynchronous) -> Result<DatabaseConnection, DbErr> {
    let mut told = false;
    connect_patiently(url, synchronous, START_PATIENCE, |e| {
        if !std::mem::replace(&mut told, true) {
            let patience = START_PATIENCE.as_secs();
            tracing::warn!(error = %e, "the database does not answer yet; waiting for it up to {patience} s");
        }
    })
    .await
}

/// Opens the database as [`connect`] does, trying again for up to `patience`
/// while it does not answer yet (see [`health::not_answering_yet`]); `waited`
/// hears of each failed try before the pause that follows it. Any other error,
/// or the last one when the patience runs out, is returned.
pub async fn connect_patiently(
    url: &str,
    synchronous: SqliteSynchronous,
    patience: Duration,
    mut waited: impl FnMut(&DbErr),
) -> Result<DatabaseConnection, DbErr> {
    let deadline = tokio::time::Instant::now() + patience;
    let mut pause = Duration::from_millis(50);
    loop {
        let error = match connect(url, synchronous).await {
            Ok(db) => return Ok(db),
            Err(e) => e,
        };
        if !health::not_answering_yet(&error) || tokio::time::Instant::now() + pause > deadline {
            return Err(error);
        }
        waited(&error);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// Whether a PostgreSQL URL names a server on this machine and leaves the TLS
/// mode unsaid: then Herald talks to it in plain text. Encrypting loopback
/// traffic protects nothing, and cost the server a tenth of its CPU time at full
/// load (sqlx, like libpq, tries TLS first by default). An explicit `sslmode`
/// in the URL is always obeyed.
fn plain_on_loopback(url: &url::Url) -> bool {
    let loopback = match url.host() {
        // A postgres:// URL's host is opaque to the URL parser, so an address arrives as a name.
        Some(url::Host::Domain(name)) => {
            name.eq_ignore_ascii_case("localhost")
                || name.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    loopback && !url.query_pairs().any(|(key, _)| key == "sslmode" || key == "ssl-mode")
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

/// Makes the rest of a PostgreSQL transaction keep one plan per statement,
/// made without hash joins, merge joins or sequential scans: for a statement
/// that finds each of its rows by primary key, the nested loop over the key is
/// right at any size of the table, even when planned on an empty one before its
/// first ANALYZE, and planning it at every execution cost the server a tenth of
/// its time at full load.
pub const PLAN_ONCE_BY_KEY: &str = "SET LOCAL plan_cache_mode = force_generic_plan; \
    SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off; SET LOCAL enable_seqscan = off";

pub fn is_unique_violation(err: &DbErr) -> bool {
    matches!(err.sql_err(), Some(SqlErr::UniqueConstraintViolation(_)))
}

/// The `n`th (from 1) bound parameter's mark: `$n` on PostgreSQL, `?` on SQLite (which numbers them by position).
pub(crate) fn placeholder(backend: DbBackend, n: usize) -> String {
    match backend {
        DbBackend::Postgres => format!("${n}"),
        _ => "?".to_string(),
    }
}

/// Runs `statements` in turn on `db` (the statement builders' counterpart for SeaORM;
/// [`sqlite_direct::Direct::execute_all`] runs them on SQLite's writer connection).
pub async fn execute_all(db: &impl ConnectionTrait, statements: Vec<Statement>) -> Result<(), DbErr> {
    for statement in statements {
        db.execute_raw(statement).await?;
    }
    Ok(())
}

pub fn is_postgres(db: &DatabaseConnection) -> bool {
    db.get_database_backend() == DbBackend::Postgres
}

#[cfg(test)]
mod tests {
    use super::{SQLITE_ACQUIRE_TIMEOUT, plain_on_loopback};
    use crate::config::SqliteSynchronous;

    /// A statement waits behind SQLite's one connection longer than a second before it is
    /// refused as if the database were away.
    #[tokio::test]
    async fn sqlite_s_one_connection_is_waited_for_longer_than_a_pooled_one() {
        let db = super::connect("sqlite::memory:", SqliteSynchronous::Full).await.unwrap();
        let pool = db.get_sqlite_connection_pool();
        assert_eq!(pool.options().get_acquire_timeout(), SQLITE_ACQUIRE_TIMEOUT);
        assert!(SQLITE_ACQUIRE_TIMEOUT > super::ACQUIRE_TIMEOUT);
    }

    fn plain(url: &str) -> bool {
        plain_on_loopback(&url::Url::parse(url).unwrap())
    }

    #[test]
    fn only_a_loopback_server_without_a_stated_tls_mode_is_spoken_to_in_plain_text() {
        assert!(plain("postgres://postgres@127.0.0.1:5432/herald"));
        assert!(plain("postgres://postgres@localhost/herald"));
        assert!(plain("postgres://postgres@[::1]:5432/herald"));
        assert!(!plain("postgres://postgres@127.0.0.1:5432/herald?sslmode=require"));
        assert!(!plain("postgres://postgres@db.example.com/herald"));
        assert!(!plain("postgres://postgres@10.0.0.5/herald"));
    }
}
