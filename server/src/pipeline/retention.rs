//! The retention sweeper. Every `retention.sweep_secs` it removes the messages
//! that ended (delivered or dead) more than `retention.messages_secs` ago, with
//! their attempts, then the events published more than `retention.events_secs`
//! ago that no open message needs, and gives the freed space back: to the file
//! system on SQLite, to new rows on PostgreSQL (by autovacuum, or by a VACUUM of
//! its own where the server runs none). It works in batches of a few hundred rows, each its own
//! short transaction, so publishes and deliveries never wait long behind it.
//! An open message (pending, delivering or held) is never removed. It also
//! forgets the per-minute attempt counts older than a day, the replay jobs that ended as long
//! ago as the messages it removes, and the answers kept for `Idempotency-Key` 24 h after their
//! first use.

use std::time::Duration;

use domain::ids::{EventId, MessageId};
use sea_orm::DbErr;
use tokio::sync::watch;

use super::Pipeline;
use crate::store::sessions::DbSessionStore;
use crate::store::{idempotency_keys, portal_links, replays, retention};

/// Rows read and removed per transaction.
const BATCH: u64 = 500;
/// SQLite pages given back per step (4 MiB of 4 KiB pages).
const PAGES_PER_STEP: u32 = 1024;

/// What one sweep removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    pub messages: u64,
    pub attempts: u64,
    pub events: u64,
}

/// Sweeps every `retention.sweep_secs` until shutdown.
pub async fn run(pipeline: Pipeline, mut shutdown: watch::Receiver<bool>) {
    let every = Duration::from_secs(pipeline.settings.retention.sweep_secs);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            return;
        }
        if pipeline.health.is_down() {
            continue;
        }
        match sweep(&pipeline).await {
            Ok(swept) if swept != Swept::default() => tracing::info!(
                messages = swept.messages,
                attempts = swept.attempts,
                events = swept.events,
                "removed history past its retention"
            ),
            Ok(_) => {}
            Err(e) => pipeline.health.failed("removing history past its retention", &e),
        }
    }
}

/// One sweep, at the pipeline's clock.
pub async fn sweep(pipeline: &Pipeline) -> Result<Swept, DbErr> {
    let (db, retention) = (&pipeline.db, &pipeline.settings.retention);
    let now = pipeline.now_ms();
    let mut swept = Swept::default();

    let ended_before = now - retention.messages_secs as i64 * 1000;
    loop {
        let ids = retention::ended_messages(db, ended_before, BATCH).await?;
        let last_batch = (ids.len() as u64) < BATCH;
        let (messages, attempts) = retention::remove_messages(db, ids, ended_before).await?;
        swept.messages += messages;
        swept.attempts += attempts;
        removed("messages", messages);
        removed("attempts", attempts);
        if last_batch {
            break;
        }
        tokio::task::yield_now().await;
    }

    // Events are read past a cursor: those an open message still needs stay, and are passed over.
    let published_before = now - retention.events_secs as i64 * 1000;
    let mut after: Option<EventId> = None;
    loop {
        let batch = retention::old_events(db, published_before, after.as_ref(), BATCH).await?;
        let Some((last, _)) = batch.last() else { break };
        after = Some(last.clone());
        let message_ids =
            batch.iter().flat_map(|(_, ids)| ids.split(',').filter(|id| !id.is_empty()).map(MessageId::from)).collect();
        let needed = retention::needed_events(db, message_ids).await?;
        let removable = batch.iter().map(|(id, _)| id).filter(|id| !needed.contains(*id)).cloned().collect();
        let events = retention::remove_events(db, removable).await?;
        swept.events += events;
        removed("events", events);
        if (batch.len() as u64) < BATCH {
            break;
        }
        tokio::task::yield_now().await;
    }

    retention::old_minutes(db, now).await?;
    // Replay jobs are kept as long as the messages they made.
    replays::remove_ended(db, ended_before).await?;
    let keys_before = now - idempotency_keys::KEPT_MS;
    while idempotency_keys::remove_old(db, keys_before, BATCH).await? > 0 {
        tokio::task::yield_now().await;
    }
    portal_links::remove_expired(db, now - portal_links::KEPT_AFTER_EXPIRY_MS).await?;
    DbSessionStore::new(db.clone()).delete_expired(now).await?;
    while retention::give_back_free_pages(db, PAGES_PER_STEP).await? > u64::from(PAGES_PER_STEP) {
        tokio::task::yield_now().await;
    }
    if swept != Swept::default() {
        retention::vacuum_unless_autovacuum(db).await?;
    }
    Ok(swept)
}

/// Counted batch by batch, so that a long sweep shows its progress.
fn removed(kind: &'static str, count: u64) {
    metrics::counter!("herald_retention_removed_total", "kind" => kind).increment(count);
}
