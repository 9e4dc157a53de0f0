//! The heartbeat of a process serving a shared (PostgreSQL) database. Every
//! two seconds it records that this process is alive, then takes back the
//! leases of any process silent for more than ten seconds: their messages are
//! due at once, to whichever lane claims them first, instead of when their
//! leases end. It runs on a connection of its own, apart from the lanes', so a
//! process busy delivering, or waiting on slow receivers, keeps beating and
//! never loses its leases to the others.

use std::time::Duration;

use sea_orm::{DatabaseConnection, TransactionTrait};
use tokio::sync::watch;

use super::Pipeline;
use crate::store::processes;

/// How often this process beats.
const EVERY: Duration = Duration::from_secs(2);
/// A process silent this long is taken for dead.
pub const SILENT_MS: i64 = 10_000;

/// Beats for this process until shutdown, on `db` (a connection of its own).
pub async fn run(db: DatabaseConnection, pipeline: Pipeline, mut shutdown: watch::Receiver<bool>) {
    let me = pipeline.process;
    let health = &pipeline.health;
    // Since when this process's beats have been recorded without a break (from the start, as
    // far as it knows). After an outage every process's last beat is old: none is taken for
    // dead until each has had the time to beat again.
    let mut beating_since = Some(i64::MIN);
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|stopped| *stopped) => return,
        }
        let now = pipeline.now_ms();
        match processes::beat(&db, me, now).await {
            Ok(alive) => {
                if !alive {
                    tracing::error!(
                        process = me,
                        "the other processes took this one for dead and took back its leases; its deliveries in \
                         flight may be repeated"
                    );
                }
                beating_since.get_or_insert(now);
            }
            Err(e) => {
                health.failed("recording the heartbeat", &e);
                beating_since = None;
            }
        }
        if beating_since.is_some_and(|since| now.saturating_sub(since) >= SILENT_MS)
            && let Err(e) = take_back_silent(&db, &pipeline, now).await
        {
            health.failed("taking back the leases of silent processes", &e);
        }
        // Paced endpoints' turns are shared among the processes alive.
        match processes::alive(&db, now - SILENT_MS).await {
            Ok(alive) => pipeline.paces.shared_by(alive as usize),
            Err(e) => health.failed("counting the processes alive", &e),
        }
    }
}

/// Takes back the leases of every other process silent for more than [`SILENT_MS`].
async fn take_back_silent(db: &DatabaseConnection, pipeline: &Pipeline, now: i64) -> Result<(), sea_orm::DbErr> {
    for number in processes::silent(db, now - SILENT_MS).await? {
        if number == pipeline.process {
            continue;
        }
        let txn = db.begin().await?;
        let taken = processes::take_back(&txn, number, now).await?;
        txn.commit().await?;
        tracing::warn!(process = number, taken, "a process fell silent; its leased messages are due again");
        if taken > 0 {
            pipeline.wake.notify_one();
        }
    }
    Ok(())
}
