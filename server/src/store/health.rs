//! Whether the database takes Herald's statements, as the last ones found.
//!
//! A statement that fails because the database is away (refused or dropped
//! connections, no connection within the pool's deadline, a read-only or full
//! disk, a server shutting down) starts an *outage*: it is logged once, and
//! from then on the intake refuses publishes at once (503) instead of queueing
//! them behind a dead connection, and the workers wait here instead of
//! retrying on their own. A probe writes one row with a growing pause (at most
//! [`PROBE_AT_MOST`]) until the database takes it, logs the end of the outage
//! and lets everyone go on. Any other failure is logged where it happens.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, RuntimeErr};
use tokio::sync::watch;

use crate::config::Settings;

/// The first pause between probes; it doubles up to [`PROBE_AT_MOST`].
const PROBE_FIRST: Duration = Duration::from_millis(100);
/// The longest pause between probes: work resumes at most this long after the database returns.
const PROBE_AT_MOST: Duration = Duration::from_secs(1);

/// How many outages one step of work waits through before it gives up.
const OUTAGE_TRIES: u32 = 20;

/// The probe: a write, since a database that answers reads may still refuse
/// writes (a full disk, a read-only file or server).
const PROBE: &str = "INSERT INTO herald_meta (name, value) VALUES ('health_probe', '') \
    ON CONFLICT (name) DO UPDATE SET value = excluded.value";

pub struct DatabaseHealth {
    db: DatabaseConnection,
    /// The database as logs and `/healthz` name it, without credentials.
    name: String,
    /// `true` while the database answers.
    up: watch::Sender<bool>,
    outage: Mutex<Option<Outage>>,
    /// When the last outage ended: a statement that waited for a connection
    /// during it may report its failure just after.
    ended: Mutex<Option<Instant>>,
}

struct Outage {
    since: Instant,
    error: String,
    failures: u64,
}

impl DatabaseHealth {
    pub fn new(db: DatabaseConnection, settings: &Settings) -> Arc<DatabaseHealth> {
        let name = describe(settings);
        Arc::new(DatabaseHealth {
            db,
            name,
            up: watch::Sender::new(true),
            outage: Mutex::default(),
            ended: Mutex::default(),
        })
    }

    /// The database, as `/healthz` names it.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn is_down(&self) -> bool {
        !*self.up.borrow()
    }

    /// The latest error of the current outage, if there is one.
    pub fn outage_error(&self) -> Option<String> {
        self.outage.lock().expect("outage").as_ref().map(|o| o.error.clone())
    }

    /// Records a statement that failed while `doing` something.
    pub fn failed(self: &Arc<Self>, doing: &str, e: &DbErr) {
        metrics::counter!("herald_db_errors_total").increment(1);
        if !is_unavailable(e) {
            tracing::error!(error = %e, "{doing} failed");
            return;
        }
        let mut outage = self.outage.lock().expect("outage");
        if let Some(outage) = outage.as_mut() {
            outage.failures += 1;
            return;
        }
        let deadline = super::acquire_timeout(self.db.get_database_backend());
        if waited_through_the_last_outage(e, *self.ended.lock().expect("ended"), deadline) {
            tracing::debug!(error = %e, "{doing} waited for a connection through the outage that just ended");
            return;
        }
        tracing::error!(
            database = %self.name, error = %e,
            "database unavailable: {doing} failed; publishing answers 503 and deliveries wait until it takes \
             writes again"
        );
        *outage = Some(Outage { since: Instant::now(), error: e.to_string(), failures: 1 });
        self.up.send_replace(false);
        tokio::spawn(self.clone().probe());
    }

    /// Returns at once while the database answers, otherwise when it answers again.
    pub async fn back(&self) {
        let mut up = self.up.subscribe();
        let _ = up.wait_for(|up| *up).await;
    }

    /// Runs `step` until it succeeds or fails for a reason other than an
    /// outage; during an outage it waits for the database's return and tries
    /// again. For work that holds something only this process can finish (a
    /// lease, an attempt sent and not yet recorded), so that it goes on within
    /// a second of the database's return rather than when its lease ends. A
    /// step that keeps failing although the probe finds the database back (a
    /// statement too large for a full disk, say) gives up after
    /// [`OUTAGE_TRIES`] outages, and its work waits for its lease.
    pub async fn through_outage<T, Step>(
        self: &Arc<Self>,
        doing: &str,
        mut step: impl FnMut() -> Step,
    ) -> Result<T, DbErr>
    where
        Step: Future<Output = Result<T, DbErr>>,
    {
        let mut tries = 0;
        loop {
            match step().await {
                Ok(done) => return Ok(done),
                Err(e) => {
                    self.failed(doing, &e);
                    tries += 1;
                    if !is_unavailable(&e) || tries >= OUTAGE_TRIES {
                        return Err(e);
                    }
                    self.back().await;
                }
            }
        }
    }

    async fn probe(self: Arc<Self>) {
        let mut pause = PROBE_FIRST;
        loop {
            tokio::time::sleep(pause).await;
            match self.db.execute_unprepared(PROBE).await {
                Ok(_) => break,
                Err(e) if is_unavailable(&e) => {
                    if let Some(outage) = self.outage.lock().expect("outage").as_mut() {
                        outage.failures += 1;
                        outage.error = e.to_string();
                    }
                }
                // The database answers, though not to the probe: a fault of its own, not an outage.
                Err(e) => {
                    tracing::error!(error = %e, "the database's health probe failed");
                    break;
                }
            }
            pause = (pause * 2).min(PROBE_AT_MOST);
        }
        drop_dead_connections(&self.db).await;
        // Under the lock, so that a failure reported meanwhile starts a new outage after this one.
        let mut outage = self.outage.lock().expect("outage");
        *self.ended.lock().expect("ended") = Some(Instant::now());
        if let Some(outage) = outage.take() {
            tracing::info!(
                database = %self.name,
                seconds = outage.since.elapsed().as_secs_f64().round(),
                failed_statements = outage.failures,
                "database available again; publishing and deliveries resume"
            );
        }
        self.up.send_replace(true);
    }
}

/// After an outage the pooled PostgreSQL connections opened before it may be
/// dead (the server restarted, and the pool pings only connections long idle):
/// each idle one is pinged now and closed if it does not answer, so that no
/// request meets one and starts a second outage.
async fn drop_dead_connections(db: &DatabaseConnection) {
    use sea_orm::sqlx::Connection;
    if db.get_database_backend() != DbBackend::Postgres {
        return;
    }
    let pool = db.get_postgres_connection_pool();
    let mut idle: Vec<_> = std::iter::from_fn(|| pool.try_acquire()).take(pool.num_idle()).collect();
    for conn in &mut idle {
        if !matches!(tokio::time::timeout(super::ACQUIRE_TIMEOUT, conn.ping()).await, Ok(Ok(()))) {
            conn.close_on_drop();
        }
    }
}

/// A wait for a connection that ran out within the pool's `deadline` of the end
/// of an outage began during it: it reports that outage, not a new one.
fn waited_through_the_last_outage(e: &DbErr, ended: Option<Instant>, deadline: Duration) -> bool {
    use sea_orm::sqlx::Error;
    let waited = match e {
        DbErr::ConnectionAcquire(sea_orm::ConnAcquireErr::Timeout) => true,
        DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e)) => {
            matches!(**e, Error::PoolTimedOut)
        }
        _ => false,
    };
    waited && ended.is_some_and(|at| at.elapsed() <= deadline + Duration::from_millis(250))
}

/// Whether an error says the database is away, rather than that a statement
/// is wrong: no connection, a lost one, a server shutting down or in
/// recovery, a read-only or full disk, a lock held past its timeout.
pub fn is_unavailable(e: &DbErr) -> bool {
    match e {
        DbErr::ConnectionAcquire(_) | DbErr::Conn(_) => true,
        DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e)) => sqlx_unavailable(e),
        _ => false,
    }
}

/// Whether a failed first connection is one a database gives while it is still
/// starting or busy: refused, timed out, a server starting up or recovering, a
/// SQLite file locked. A wrong password, an unknown database or a SQLite file
/// that cannot be opened at all are not: waiting would not mend them.
pub fn not_answering_yet(e: &DbErr) -> bool {
    match e {
        DbErr::ConnectionAcquire(_) => true,
        DbErr::Conn(RuntimeErr::SqlxError(e))
        | DbErr::Exec(RuntimeErr::SqlxError(e))
        | DbErr::Query(RuntimeErr::SqlxError(e)) => sqlx_unavailable(e) && !sqlite_cannot_open(e),
        _ => false,
    }
}

/// SQLite's CANTOPEN: a missing directory or a path that is not a file.
fn sqlite_cannot_open(e: &sea_orm::sqlx::Error) -> bool {
    let sea_orm::sqlx::Error::Database(db) = e else { return false };
    sqlite_primary_code(db.as_ref()) == Some(14)
}

/// A SQLite error's primary result code (its extended code's low byte); `None` for PostgreSQL's.
fn sqlite_primary_code(db: &dyn sea_orm::sqlx::error::DatabaseError) -> Option<i32> {
    db.try_downcast_ref::<sea_orm::sqlx::sqlite::SqliteError>()?;
    Some(db.code().unwrap_or_default().parse::<i32>().unwrap_or_default() & 0xff)
}

/// Whether a SQLite result code (primary or extended) says the database is away
/// rather than that a statement is wrong: BUSY, LOCKED, READONLY, IOERR, FULL, CANTOPEN.
pub fn sqlite_code_says_away(code: i32) -> bool {
    matches!(code & 0xff, 5 | 6 | 8 | 10 | 13 | 14)
}

fn sqlx_unavailable(e: &sea_orm::sqlx::Error) -> bool {
    use sea_orm::sqlx::Error;
    match e {
        Error::Io(_) | Error::Tls(_) | Error::Protocol(_) | Error::PoolTimedOut | Error::PoolClosed => true,
        Error::WorkerCrashed => true,
        Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            if let Some(primary) = sqlite_primary_code(db.as_ref()) {
                sqlite_code_says_away(primary)
            } else {
                // PostgreSQL's classes: connection exception, insufficient resources (a full
                // disk), operator intervention (shutdown), system error; and a read-only
                // transaction (a standby, or a database set read-only).
                ["08", "53", "57", "58"].iter().any(|class| code.starts_with(class)) || code == "25006"
            }
        }
        _ => false,
    }
}

/// The database without credentials: `PostgreSQL at host:port/name` or `SQLite file`.
pub fn describe(settings: &Settings) -> String {
    let url = &settings.database_url;
    if url.starts_with("sqlite:") {
        return match settings.sqlite_file() {
            Some(file) => format!("SQLite {}", file.display()),
            None => "SQLite in memory".into(),
        };
    }
    match url::Url::parse(url) {
        Ok(u) => format!(
            "PostgreSQL at {}:{}{}",
            u.host_str().unwrap_or("localhost"),
            u.port().unwrap_or(5432),
            if u.path().is_empty() { "/" } else { u.path() }
        ),
        Err(_) => "PostgreSQL".into(),
    }
}

/// A statement that took longer than `deadline`, as the error of an unavailable database.
/// One round trip to the database, for the health check.
pub async fn ping(db: &DatabaseConnection) -> Result<(), DbErr> {
    db.execute_unprepared("SELECT 1").await.map(drop)
}

pub fn too_slow(deadline: Duration) -> DbErr {
    DbErr::Conn(RuntimeErr::Internal(format!("no answer within {} ms", deadline.as_millis())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn describe(url: &str) -> String {
        super::describe(&Settings { database_url: url.into(), ..Settings::default() })
    }

    #[test]
    fn the_database_is_named_without_its_credentials() {
        assert_eq!(
            describe("postgres://herald:secret@db.internal:6432/events"),
            "PostgreSQL at db.internal:6432/events"
        );
        assert_eq!(describe("postgres://postgres@127.0.0.1/herald"), "PostgreSQL at 127.0.0.1:5432/herald");
        assert_eq!(describe("sqlite://herald.db?mode=rwc"), "SQLite herald.db");
        assert_eq!(describe("sqlite::memory:"), "SQLite in memory");
    }

    #[test]
    fn lost_connections_are_an_outage_and_a_wrong_statement_is_not() {
        assert!(is_unavailable(&DbErr::ConnectionAcquire(sea_orm::ConnAcquireErr::Timeout)));
        assert!(is_unavailable(&too_slow(Duration::from_millis(900))));
        let io = sea_orm::sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(is_unavailable(&DbErr::Query(RuntimeErr::SqlxError(Arc::new(io)))));
        assert!(!is_unavailable(&DbErr::RecordNotFound("message".into())));
        let decode = sea_orm::sqlx::Error::ColumnNotFound("id".into());
        assert!(!is_unavailable(&DbErr::Query(RuntimeErr::SqlxError(Arc::new(decode)))));
    }

    #[test]
    fn at_start_a_database_that_refuses_or_times_out_is_waited_for_and_a_wrong_one_is_not() {
        let sqlx = |e: sea_orm::sqlx::Error| DbErr::Conn(RuntimeErr::SqlxError(Arc::new(e)));
        let refused = sea_orm::sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(not_answering_yet(&sqlx(refused)));
        assert!(not_answering_yet(&sqlx(sea_orm::sqlx::Error::PoolTimedOut)));
        assert!(not_answering_yet(&DbErr::ConnectionAcquire(sea_orm::ConnAcquireErr::Timeout)));
        let config = sea_orm::sqlx::Error::Configuration("no such option".into());
        assert!(!not_answering_yet(&sqlx(config)));
        assert!(!not_answering_yet(&DbErr::Custom("a bad URL".into())));
    }

    #[test]
    fn a_wait_for_a_connection_that_ends_just_after_an_outage_belongs_to_it() {
        let timeout = DbErr::ConnectionAcquire(sea_orm::ConnAcquireErr::Timeout);
        let pool = DbErr::Exec(RuntimeErr::SqlxError(Arc::new(sea_orm::sqlx::Error::PoolTimedOut)));
        let refused = sea_orm::sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let refused = DbErr::Query(RuntimeErr::SqlxError(Arc::new(refused)));
        let deadline = crate::store::ACQUIRE_TIMEOUT;
        let just_now = Some(Instant::now());
        assert!(waited_through_the_last_outage(&timeout, just_now, deadline));
        assert!(waited_through_the_last_outage(&pool, just_now, deadline));
        assert!(!waited_through_the_last_outage(&refused, just_now, deadline), "a refused connection is a new outage");
        let long_ago = Instant::now().checked_sub(Duration::from_secs(2));
        assert!(!waited_through_the_last_outage(&timeout, long_ago, deadline), "a wait that began after the outage");
        let sqlite = crate::store::SQLITE_ACQUIRE_TIMEOUT;
        assert!(waited_through_the_last_outage(&timeout, long_ago, sqlite), "SQLite's wait is longer");
        assert!(!waited_through_the_last_outage(&timeout, None, deadline));
        let closed = DbErr::ConnectionAcquire(sea_orm::ConnAcquireErr::ConnectionClosed);
        assert!(!waited_through_the_last_outage(&closed, just_now, deadline), "a closed connection is not a wait");
    }
}
