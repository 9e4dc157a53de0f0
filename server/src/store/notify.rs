//! Wake-ups between Herald processes sharing one PostgreSQL database: a commit
//! that makes messages due sends NOTIFY; every process LISTENs and wakes its
//! lanes on the others' notifications. On SQLite (one process) both are no-ops.

use std::sync::Arc;
use std::time::Duration;

use sea_orm::sqlx::postgres::PgListener;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, RuntimeErr};
use tokio::sync::watch;

use super::health::DatabaseHealth;

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
/// reconnects after errors (reported to `health`, and after an outage only once
/// the database answers again), and then calls it with an empty origin, since
/// notifications sent meanwhile were missed.
pub async fn listen(
    db: DatabaseConnection,
    health: Arc<DatabaseHealth>,
    notified: impl Fn(&str),
    mut shutdown: watch::Receiver<bool>,
) {
    if db.get_database_backend() != DbBackend::Postgres {
        return;
    }
    let mut reconnecting = false;
    while !*shutdown.borrow() {
        let connected = async {
            let mut listener = PgListener::connect_with(db.get_postgres_connection_pool()).await?;
            listener.listen(CHANNEL).await?;
            Ok::<_, sea_orm::sqlx::Error>(listener)
        };
        let mut listener = match connected.await {
            Ok(listener) => listener,
            Err(e) => {
                health.failed("listening for other processes' wake-ups", &DbErr::Conn(RuntimeErr::SqlxError(e.into())));
                if !health.is_down() {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                tokio::select! {
                    _ = health.back() => {}
                    _ = shutdown.changed() => return,
                }
                reconnecting = true;
                continue;
            }
        };
        if std::mem::take(&mut reconnecting) {
            notified("");
        }
        loop {
            tokio::select! {
                received = listener.recv() => match received {
                    Ok(notification) => notified(notification.payload()),
                    Err(e) => {
                        health.failed("listening for other processes' wake-ups", &DbErr::Conn(RuntimeErr::SqlxError(e.into())));
                        reconnecting = true;
                        break;
                    }
                },
                _ = shutdown.changed() => return,
            }
        }
    }
}
