//! Wake-ups between Herald processes sharing one PostgreSQL database: a commit
//! that makes messages due sends NOTIFY; every process LISTENs and wakes its
//! lanes on the others' notifications. On SQLite (one process) both are no-ops.

use std::time::Duration;

use sea_orm::sqlx::postgres::PgListener;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr};
use tokio::sync::watch;

const CHANNEL: &str = "herald_wake";

/// Inside a transaction, the notification is sent at commit, never before. It
/// carries the sender's `origin` (hex digits naming the process), so that a
/// process can ignore its own: it has woken its lanes itself.
pub async fn send(db: &impl ConnectionTrait, origin: &str) -> Result<(), DbErr> {
    if db.get_database_backend() == DbBackend::Postgres {
        debug_assert!(origin.bytes().all(|b| b.is_ascii_hexdigit()), "a literal needs no quoting");
        db.execute_unprepared(&format!("NOTIFY {CHANNEL}, '{origin}'")).await?;
    }
    Ok(())
}

/// Calls `notified` with the origin of every notification until shutdown;
/// reconnects after errors.
pub async fn listen(db: DatabaseConnection, notified: impl Fn(&str), mut shutdown: watch::Receiver<bool>) {
    if db.get_database_backend() != DbBackend::Postgres {
        return;
    }
    while !*shutdown.borrow() {
        let mut listener = match PgListener::connect_with(db.get_postgres_connection_pool()).await {
            Ok(mut l) => match l.listen(CHANNEL).await {
                Ok(()) => l,
                Err(e) => {
                    tracing::warn!(error = %e, "LISTEN failed; other instances' events wait for the poll");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            },
            Err(e) => {
                tracing::warn!(error = %e, "cannot open the LISTEN connection");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        loop {
            tokio::select! {
                received = listener.recv() => match received {
                    Ok(notification) => notified(notification.payload()),
                    Err(e) => {
                        tracing::warn!(error = %e, "the LISTEN connection dropped; reconnecting");
                        break;
                    }
                },
                _ = shutdown.changed() => return,
            }
        }
    }
}
