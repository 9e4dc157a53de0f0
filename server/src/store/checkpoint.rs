//! SQLite's WAL checkpoints, off the writer. By default the commit that fills
//! the WAL copies it into the database file and waits for the disk: one
//! publish in a few hundred paid for everyone's writes. Here a connection of
//! its own checkpoints in the background instead, and the writer's automatic
//! checkpoint is only a backstop should this task fall far behind.

use std::str::FromStr;
use std::time::Duration;

use sea_orm::sqlx::sqlite::SqliteConnectOptions;
use sea_orm::sqlx::{ConnectOptions, Connection, SqliteConnection};
use tokio::sync::watch;

/// WAL pages after which the writer checkpoints by itself (64 MiB of 4 KiB pages).
pub const WRITER_BACKSTOP_PAGES: &str = "16384";

/// How often the background checkpoint runs; an idle database makes it a no-op.
const EVERY: Duration = Duration::from_millis(200);

/// Whether `url` names a SQLite file whose WAL another connection can checkpoint.
pub fn applies_to(url: &str) -> bool {
    url.starts_with("sqlite:") && !url.contains(":memory:") && !url.contains("mode=memory")
}

/// Checkpoints the database at `url` until `shutdown` turns true. A checkpoint
/// that fails (the file busy, say) is tried again at the next tick.
pub async fn run(url: String, mut shutdown: watch::Receiver<bool>) {
    let mut conn = match open(&url).await {
        Ok(conn) => conn,
        Err(e) => {
            tracing::warn!(error = %e, "no background checkpoints; the writer checkpoints by itself");
            return;
        }
    };
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|stopped| *stopped) => break,
        }
        // PASSIVE never waits for the writer or readers: it copies what it can.
        if let Err(e) = sea_orm::sqlx::query("PRAGMA wal_checkpoint(PASSIVE)").execute(&mut conn).await {
            tracing::debug!(error = %e, "checkpoint deferred");
        }
    }
    let _ = conn.close().await;
}

async fn open(url: &str) -> Result<SqliteConnection, sea_orm::sqlx::Error> {
    SqliteConnectOptions::from_str(url)?.create_if_missing(false).connect().await
}
