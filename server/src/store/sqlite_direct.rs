//! SQLite transactions run on the calling thread, over the writer connection
//! itself: the hot path's batches (a publish's events and messages, an
//! attempts' records) hand the connection over once, instead of once per
//! statement.
//!
//! sqlx keeps SQLite's one connection on a thread of its own and passes it
//! each statement over a channel, so every statement of a transaction costs a
//! wake-up of that thread and one of a Tokio worker for the answer.
//! `lock_handle` lends the connection out while that thread waits; the
//! statements here are the text and values the store builds for SeaORM, run
//! through rusqlite on the same handle. Alternating runs at 32 publishing
//! connections gave about a tenth more deliveries per second this way (see
//! docs/performance.md, "The hot path's SQLite transactions on the caller's
//! thread").
//!
//! The work is synchronous: it holds the Tokio worker for as long as SQLite
//! takes, as it held sqlx's thread before, and only the writer connection is
//! used (checkpoints and backups run on connections of their own).
//!
//! Statements stay prepared on the writer connection from one transaction to
//! the next (the batches' texts repeat, and preparing them anew cost about a
//! fifth of the instructions per delivery). sqlx closes the connection with
//! `sqlite3_close`, which fails while any statement is unfinalized, and sqlx
//! then panics: so the kept statements are finalized by the connection's own
//! close, in a callback SQLite makes before it checks (`SQLITE_TRACE_CLOSE`).
//! That callback is the writer connection's one trace callback: nothing else
//! may set one on it (sqlx does not), or the statements would outlive it.

use std::ffi::{CStr, c_int, c_uint, c_void};
use std::sync::Arc;

use rusqlite::ffi;
use rusqlite::types::{ToSqlOutput, ValueRef};
use sea_orm::sqlx;
use sea_orm::{ConnAcquireErr, DatabaseConnection, DbErr, RuntimeErr, Statement, Value};

/// An open transaction on the writer connection.
pub struct Direct<'c> {
    conn: &'c rusqlite::Connection,
}

impl Direct<'_> {
    /// Runs `statement` to its end; returns the rows it changed.
    pub fn execute(&self, statement: &Statement) -> Result<u64, DbErr> {
        let mut prepared = self.prepare(statement)?;
        let mut rows = prepared.raw_query();
        while rows.next().map_err(failed)?.is_some() {}
        Ok(self.conn.changes())
    }

    /// Runs each of `statements` to its end.
    pub fn execute_all(&self, statements: &[Statement]) -> Result<(), DbErr> {
        statements.iter().try_for_each(|statement| self.execute(statement).map(drop))
    }

    /// Every row `statement` returns, each read by `read`.
    pub fn rows<T>(
        &self,
        statement: &Statement,
        mut read: impl FnMut(&rusqlite::Row) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, DbErr> {
        let mut prepared = self.prepare(statement)?;
        let mut rows = prepared.raw_query();
        let mut read_rows = Vec::new();
        while let Some(row) = rows.next().map_err(failed)? {
            read_rows.push(read(row).map_err(failed)?);
        }
        Ok(read_rows)
    }

    /// The first column of every row `statement` returns, as text (such as the ids of `RETURNING id`).
    pub fn texts<T: From<String>>(&self, statement: &Statement) -> Result<Vec<T>, DbErr> {
        self.rows(statement, |row| row.get::<_, String>(0).map(T::from))
    }

    fn prepare(&self, statement: &Statement) -> Result<rusqlite::CachedStatement<'_>, DbErr> {
        let mut prepared = self.conn.prepare_cached(&statement.sql).map_err(failed)?;
        for (i, value) in statement.values.iter().flat_map(|values| values.0.iter()).enumerate() {
            prepared.raw_bind_parameter(i + 1, bound(value)?).map_err(failed)?;
        }
        Ok(prepared)
    }
}

/// Runs `work` in one transaction (`BEGIN IMMEDIATE`) on the writer connection
/// of `db`, a SQLite database: committed when it returns `Some`, rolled back when
/// it returns `None` or an error, or panics.
pub async fn transaction<T>(
    db: &DatabaseConnection,
    work: impl FnOnce(&Direct) -> Result<Option<T>, DbErr>,
) -> Result<Option<T>, DbErr> {
    let mut pooled = db.get_sqlite_connection_pool().acquire().await.map_err(not_lent)?;
    on_lent_connection(&mut pooled, work).await
}

/// [`transaction`] on `connection`.
async fn on_lent_connection<T>(
    connection: &mut sqlx::SqliteConnection,
    work: impl FnOnce(&Direct) -> Result<Option<T>, DbErr>,
) -> Result<Option<T>, DbErr> {
    let mut handle = connection.lock_handle().await.map_err(not_lent)?;
    // SAFETY: the handle is sqlx's open connection, lent to this thread until `handle` drops.
    let conn = unsafe { kept(handle.as_raw_handle().as_ptr()) }?;
    conn.prepare_cached("BEGIN IMMEDIATE").and_then(|mut begin| begin.raw_execute()).map_err(failed)?;
    let open = Open { conn };
    let result = work(&Direct { conn });
    let end = if matches!(result, Ok(Some(_))) { "COMMIT" } else { "ROLLBACK" };
    // A COMMIT that fails (a full disk) leaves the transaction to `open`, which rolls it back.
    conn.prepare_cached(end).and_then(|mut end| end.raw_execute()).map_err(failed)?;
    std::mem::forget(open);
    drop(handle);
    result
}

/// Where the writer connection keeps its [`kept`] statements.
const KEPT: &CStr = c"herald.kept_statements";

/// Statements kept prepared at most; a batch's text depends on its size.
const KEPT_STATEMENTS: usize = 256;

/// The writer connection as rusqlite sees it, with the statements it keeps
/// prepared: made at the first transaction, and kept in the connection itself
/// (SQLite's client data) until [`forget_kept`] finalizes them as it closes.
///
/// # Safety
/// `handle` is an open connection lent to the caller (sqlx's thread waits for
/// it) for as long as the returned reference lives: only one thread uses it at
/// a time, and it cannot close meanwhile.
unsafe fn kept<'h>(handle: *mut ffi::sqlite3) -> Result<&'h rusqlite::Connection, DbErr> {
    // SAFETY: as the caller promises; the pointer in the slot is this function's own box,
    // freed only by `forget_kept`, which clears the slot first.
    unsafe {
        let slot = ffi::sqlite3_get_clientdata(handle, KEPT.as_ptr()).cast::<rusqlite::Connection>();
        if let Some(conn) = slot.as_ref() {
            return Ok(conn);
        }
        // A connection made from a handle does not close it when dropped; it only finalizes
        // its own statements.
        let conn = rusqlite::Connection::from_handle(handle).map_err(failed)?;
        conn.set_prepared_statement_cache_capacity(KEPT_STATEMENTS);
        let slot = Box::into_raw(Box::new(conn));
        if ffi::sqlite3_set_clientdata(handle, KEPT.as_ptr(), slot.cast(), None) != ffi::SQLITE_OK {
            drop(Box::from_raw(slot));
            return Err(DbErr::Conn(RuntimeErr::Internal("SQLite: out of memory".into())));
        }
        ffi::sqlite3_trace_v2(handle, ffi::SQLITE_TRACE_CLOSE, Some(forget_kept), slot.cast());
        Ok(&*slot)
    }
}

/// SQLite's callback as the writer connection closes, before it checks that no
/// statement is left: finalizes the kept ones (see [`kept`]).
unsafe extern "C" fn forget_kept(event: c_uint, kept: *mut c_void, handle: *mut c_void, _: *mut c_void) -> c_int {
    if event == ffi::SQLITE_TRACE_CLOSE {
        // SAFETY: `kept` is the box `kept` made for this connection, and the connection is
        // closing on this thread: nobody else holds it.
        unsafe {
            ffi::sqlite3_set_clientdata(handle.cast(), KEPT.as_ptr(), std::ptr::null_mut(), None);
            drop(Box::from_raw(kept.cast::<rusqlite::Connection>()));
        }
    }
    0
}

/// Rolls back a transaction that did not end (`work` panicked, or the COMMIT
/// failed), so that sqlx gets its connection back outside any transaction.
struct Open<'c> {
    conn: &'c rusqlite::Connection,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        let _ = self.conn.execute_batch("ROLLBACK");
    }
}

/// A value as SQLite binds it, borrowed: the kinds the store's statements use.
fn bound(value: &Value) -> Result<ToSqlOutput<'_>, DbErr> {
    let integer = |x: Option<i64>| x.map_or(ValueRef::Null, ValueRef::Integer);
    Ok(ToSqlOutput::Borrowed(match value {
        Value::Bool(x) => integer(x.map(i64::from)),
        Value::TinyInt(x) => integer(x.map(i64::from)),
        Value::SmallInt(x) => integer(x.map(i64::from)),
        Value::Int(x) => integer(x.map(i64::from)),
        Value::BigInt(x) => integer(*x),
        Value::TinyUnsigned(x) => integer(x.map(i64::from)),
        Value::SmallUnsigned(x) => integer(x.map(i64::from)),
        Value::Unsigned(x) => integer(x.map(i64::from)),
        Value::Float(x) => x.map_or(ValueRef::Null, |x| ValueRef::Real(f64::from(x))),
        Value::Double(x) => x.map_or(ValueRef::Null, ValueRef::Real),
        Value::String(x) => x.as_ref().map_or(ValueRef::Null, |x| ValueRef::Text(x.as_bytes())),
        Value::Bytes(x) => x.as_ref().map_or(ValueRef::Null, |x| ValueRef::Blob(x)),
        other => return Err(DbErr::Type(format!("a value SQLite's direct statements do not bind: {other:?}"))),
    }))
}

/// SQLite's error as the store reports it: one that says the database is away
/// (busy, locked, read-only, an I/O error, a full disk) as a connection error,
/// which [`super::health`] counts as an outage; any other as a failed statement.
fn failed(e: rusqlite::Error) -> DbErr {
    let away = match &e {
        rusqlite::Error::SqliteFailure(error, _) => super::health::sqlite_code_says_away(error.extended_code),
        _ => false,
    };
    let error = RuntimeErr::Internal(format!("SQLite: {e}"));
    if away { DbErr::Conn(error) } else { DbErr::Exec(error) }
}

/// The pool's refusal to lend its connection, as SeaORM reports it.
fn not_lent(e: sqlx::Error) -> DbErr {
    match e {
        sqlx::Error::PoolTimedOut => DbErr::ConnectionAcquire(ConnAcquireErr::Timeout),
        e => DbErr::Conn(RuntimeErr::SqlxError(Arc::new(e))),
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use sea_orm::{ConnectionTrait, DbBackend, TransactionTrait};

    use super::*;
    use crate::config::SqliteSynchronous;

    fn insert(name: &str) -> Statement {
        let sql = "INSERT INTO t (name) VALUES (?) RETURNING name";
        Statement::from_sql_and_values(DbBackend::Sqlite, sql, [name.into()])
    }

    #[tokio::test]
    async fn work_commits_or_rolls_back_and_sqlx_gets_its_connection_back_outside_any_transaction() {
        let db = crate::store::connect("sqlite::memory:", SqliteSynchronous::Full).await.unwrap();
        db.execute_unprepared("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL)").await.unwrap();

        let returned = transaction(&db, |txn| Ok(Some(txn.texts::<String>(&insert("kept"))?))).await.unwrap();
        assert_eq!(returned, Some(vec!["kept".to_string()]));
        let declined = transaction(&db, |txn| txn.execute(&insert("declined")).map(|_| None::<()>)).await.unwrap();
        assert_eq!(declined, None);
        let wrong = Statement::from_string(DbBackend::Sqlite, "INSERT INTO missing VALUES (1)");
        let failed = transaction(&db, |txn| {
            txn.execute(&insert("failed"))?;
            txn.execute(&wrong).map(Some)
        });
        assert!(matches!(failed.await, Err(DbErr::Exec(_))));
        let panicked = std::panic::AssertUnwindSafe(transaction(&db, |txn| -> Result<Option<()>, DbErr> {
            txn.execute(&insert("panicked")).unwrap();
            panic!("the work panics inside its transaction")
        }));
        assert!(panicked.catch_unwind().await.is_err());

        // Only the committed row is there, read through sqlx, which can open a transaction again.
        let txn = db.begin().await.unwrap();
        let rows = txn.query_all_raw(Statement::from_string(DbBackend::Sqlite, "SELECT name FROM t")).await.unwrap();
        let names: Vec<String> = rows.iter().map(|row| row.try_get("", "name").unwrap()).collect();
        assert_eq!(names, ["kept"]);
        txn.commit().await.unwrap();
    }

    #[test]
    fn sqlite_errors_that_say_the_database_is_away_count_as_an_outage() {
        let error = |code| rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None);
        for away in [rusqlite::ffi::SQLITE_BUSY, rusqlite::ffi::SQLITE_IOERR_FSYNC, rusqlite::ffi::SQLITE_FULL] {
            assert!(super::super::health::is_unavailable(&failed(error(away))), "{away}");
        }
        for wrong in [rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY, rusqlite::ffi::SQLITE_ERROR] {
            assert!(!super::super::health::is_unavailable(&failed(error(wrong))), "{wrong}");
        }
    }

    #[tokio::test]
    async fn kept_statements_are_reused_and_do_not_stop_sqlx_closing_the_connection() {
        use sea_orm::sqlx::{Connection, Executor};
        let mut connection = sqlx::SqliteConnection::connect("sqlite::memory:").await.unwrap();
        connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL)").await.unwrap();
        for name in ["a", "b"] {
            let kept = on_lent_connection(&mut connection, |txn| Ok(Some(txn.texts::<String>(&insert(name))?)));
            assert_eq!(kept.await.unwrap(), Some(vec![name.to_string()]));
        }
        let mut handle = connection.lock_handle().await.unwrap();
        let mut prepared = Vec::new();
        let mut statement = std::ptr::null_mut();
        // SAFETY: the handle is lent to this thread; each statement is the connection's own.
        unsafe {
            loop {
                statement = rusqlite::ffi::sqlite3_next_stmt(handle.as_raw_handle().as_ptr(), statement);
                if statement.is_null() {
                    break;
                }
                prepared.push(CStr::from_ptr(rusqlite::ffi::sqlite3_sql(statement)).to_str().unwrap().to_owned());
            }
        }
        // Prepared once for both transactions, and still there.
        for sql in ["BEGIN IMMEDIATE", "COMMIT", &insert("").sql] {
            assert_eq!(prepared.iter().filter(|kept| *kept == sql).count(), 1, "{sql} in {prepared:?}");
        }
        drop(handle);
        // sqlite3_close fails on an unfinalized statement, and sqlx's thread then panics,
        // which `close` reports as an error.
        connection.close().await.unwrap();
    }

    #[test]
    fn values_bind_as_sqlite_stores_them() {
        let is = |value: Value, expected: ValueRef| assert_eq!(bound(&value).unwrap(), ToSqlOutput::Borrowed(expected));
        is(Value::Int(Some(7)), ValueRef::Integer(7));
        is(Value::BigInt(None), ValueRef::Null);
        is(Value::Bool(Some(true)), ValueRef::Integer(1));
        is(Value::String(Some("a".into())), ValueRef::Text(b"a"));
        assert!(bound(&Value::Char(Some('a'))).is_err());
    }
}
