//! The flush that makes an answer durable on SQLite (`sqlite_synchronous =
//! full`, the default). The writer connection runs with `synchronous = NORMAL`:
//! its commits reach the write-ahead log without waiting for the disk, so the
//! lanes' claims and attempt records, which at-least-once may lose (a lost one
//! only repeats a delivery), never queue behind a flush. Whatever is answered to
//! a client is flushed here before the answer leaves: one `fdatasync` of the log,
//! made off the writer connection (the next transaction runs meanwhile) and
//! shared by every answer waiting when it starts. A publish batch asks once,
//! as its commit returns, and answers its requests after that flush (they are
//! marked [`Flushed`]); any other answer asks as it leaves (the flush layer).
//!
//! Why that is enough: in WAL mode a commit is durable once the log's frames up
//! to its commit frame are on disk, and a flush of the log file begun after the
//! commit returned covers them (`fdatasync` flushes the file, whichever
//! descriptor asks). The log starts over only after a checkpoint has copied it
//! into the database file and synced that file, so nothing flushed here is lost
//! when it does.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sea_orm::DbErr;
use tokio::sync::Mutex;

use crate::config::{Settings, SqliteSynchronous};

/// Marks the answer to a request on a safe method that changed state all the
/// same (opening a portal link uses the link and starts a session): the flush
/// layer then makes it wait for the flush, as it does every other method's.
#[derive(Clone, Copy, Debug)]
pub struct WroteOnSafeMethod;

/// Marks an answer whose writes were on disk before it was made: a publish's,
/// which the intake answers only after the flush of its batch's commit. The
/// flush layer lets it through without a flush of its own. A layer that writes
/// after the handler (an `Idempotency-Key`'s kept answer) takes the mark off.
#[derive(Clone, Copy, Debug)]
pub struct Flushed;

pub struct WalFlush {
    wal: PathBuf,
    /// Answers that have asked for a flush so far; each holds the next number.
    asked: AtomicU64,
    /// One flush at a time; holds the highest number the latest one covered.
    covered: Mutex<u64>,
    /// Flushes made, which the tests count.
    #[cfg(test)]
    flushes: AtomicU64,
}

impl WalFlush {
    /// The flush for a SQLite file whose commits Herald must make durable
    /// itself; None on PostgreSQL, in memory, or with `sqlite_synchronous = normal`.
    pub fn for_settings(settings: &Settings) -> Option<WalFlush> {
        if settings.sqlite_synchronous != SqliteSynchronous::Full {
            return None;
        }
        let file = settings.sqlite_file()?;
        let mut wal = file.into_os_string();
        wal.push("-wal");
        Some(WalFlush::of_log(PathBuf::from(wal)))
    }

    /// The flush of the log file at `wal`.
    pub fn of_log(wal: PathBuf) -> WalFlush {
        WalFlush {
            wal,
            asked: AtomicU64::new(0),
            covered: Mutex::new(0),
            #[cfg(test)]
            flushes: AtomicU64::new(0),
        }
    }

    /// How the writer connection commits: without waiting for the disk when
    /// this flush makes the answers durable, else as configured.
    pub fn writer_synchronous(settings: &Settings) -> SqliteSynchronous {
        match WalFlush::for_settings(settings) {
            Some(_) => SqliteSynchronous::Normal,
            None => settings.sqlite_synchronous,
        }
    }

    /// Returns once everything committed before the call is on disk; a flush
    /// that fails is the store's error, which answers 503.
    pub async fn flush(&self) -> Result<(), DbErr> {
        self.flush_log().await.map_err(|e| DbErr::Custom(format!("flushing the write-ahead log: {e}")))
    }

    async fn flush_log(&self) -> io::Result<()> {
        let ticket = self.asked.fetch_add(1, Ordering::SeqCst) + 1;
        let mut covered = self.covered.lock().await;
        if *covered >= ticket {
            // A flush that began after this caller asked has finished meanwhile.
            return Ok(());
        }
        // Every number handed out so far belongs to a caller whose commits came before it asked.
        let covers = self.asked.load(Ordering::SeqCst);
        let wal = self.wal.clone();
        tokio::task::spawn_blocking(move || sync_log(&wal)).await.map_err(io::Error::other)??;
        *covered = covers;
        #[cfg(test)]
        self.flushes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Flushes made so far.
    #[cfg(test)]
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    /// The flush of a log file made for a test, in a directory of its own named
    /// after `name`, which the caller removes.
    #[cfg(test)]
    pub fn in_temp_dir(name: &str) -> (WalFlush, PathBuf) {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("h.db-wal"), b"frames").unwrap();
        (WalFlush::of_log(dir.join("h.db-wal")), dir)
    }

    /// The flush of a log that cannot be opened (its directory is a file), so every flush fails.
    #[cfg(test)]
    pub fn failing() -> WalFlush {
        WalFlush::of_log("/proc/self/status/h.db-wal".into())
    }
}

/// Flushes the log file through a descriptor of its own, opened each time: the
/// file is replaced when the last connection closes. A missing log means that
/// closing checkpointed it into the database file, synced, and removed it.
fn sync_log(wal: &Path) -> io::Result<()> {
    match std::fs::File::open(wal) {
        Ok(file) => file.sync_data(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: &str, synchronous: SqliteSynchronous) -> Settings {
        Settings { database_url: url.into(), sqlite_synchronous: synchronous, ..Settings::default() }
    }

    #[test]
    fn only_a_sqlite_file_with_full_is_flushed_by_herald() {
        let full = WalFlush::for_settings(&settings("sqlite://data/herald.db?mode=rwc", SqliteSynchronous::Full));
        assert_eq!(full.map(|f| f.wal), Some(PathBuf::from("data/herald.db-wal")));
        assert!(WalFlush::for_settings(&settings("sqlite://h.db", SqliteSynchronous::Normal)).is_none());
        assert!(WalFlush::for_settings(&settings("sqlite::memory:", SqliteSynchronous::Full)).is_none());
        assert!(WalFlush::for_settings(&settings("postgres://h@127.0.0.1/x", SqliteSynchronous::Full)).is_none());
    }

    #[tokio::test]
    async fn callers_waiting_together_share_one_flush() {
        let dir = std::env::temp_dir().join(format!("herald-wal-flush-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("h.db");
        std::fs::write(dir.join("h.db-wal"), b"frames").unwrap();
        let flush =
            WalFlush::for_settings(&settings(&format!("sqlite://{}", db.display()), SqliteSynchronous::Full)).unwrap();
        // Hold the lock as a running flush would, while three callers ask.
        let held = flush.covered.lock().await;
        let waiting = futures::future::join_all((0..3).map(|_| flush.flush()));
        let (results, ()) = tokio::join!(waiting, async move {
            tokio::task::yield_now().await;
            drop(held);
        });
        assert!(results.into_iter().all(|r| r.is_ok()));
        assert_eq!(flush.flushes.load(Ordering::Relaxed), 1, "one flush after the wait covers all three");
        // A missing log (closed and checkpointed) is not an error.
        std::fs::remove_file(dir.join("h.db-wal")).unwrap();
        flush.flush().await.unwrap();
        assert_eq!(flush.flushes.load(Ordering::Relaxed), 2, "a caller after that flush gets one of its own");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_failed_flush_is_an_error_and_covers_no_one() {
        let flush = WalFlush::failing();
        assert!(flush.flush().await.is_err());
        assert!(flush.flush().await.is_err(), "the next caller tries again");
        assert_eq!(*flush.covered.lock().await, 0);
        assert_eq!(flush.flushes.load(Ordering::Relaxed), 0);
    }
}
