//! The gauges an operator alerts on, re-read from the database on a timer
//! rather than at each scrape: every 10 s the messages by state (the delivered
//! ones as every message kept, a count kept with the messages, less the rest),
//! the endpoints by circuit state and, per lane, the age of the oldest message
//! due but not yet sent.
//! The database pool's connections are read from the pool itself. The latest
//! reading's messages by state are kept ([`Latest`]) for the admin's overview,
//! which would otherwise count every customer's undelivered messages itself.
//! Each process sharing a database reports the same values, so alerts take
//! their maximum.

use std::sync::Mutex;
use std::time::Duration;

use domain::states::{EndpointState, MessageState};
use sea_orm::{DatabaseConnection, DbBackend, DbErr};
use tokio::sync::watch;

use super::Pipeline;
use crate::store::endpoints;
use crate::store::messages::{Lane, gauges};

pub const EVERY: Duration = Duration::from_secs(10);

/// Messages by state, as a reading counts them.
pub type ByState = Vec<(MessageState, u64)>;

/// The latest reading's messages by state, and when it was read (unix milliseconds).
#[derive(Default)]
pub struct Latest(Mutex<Option<(i64, ByState)>>);

impl Latest {
    pub fn set(&self, read_at_ms: i64, messages: ByState) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((read_at_ms, messages));
    }

    /// The latest messages by state, unless read more than two periods before `now_ms`
    /// (the timer is not running, or the database was away).
    pub fn messages(&self, now_ms: i64) -> Option<ByState> {
        let latest = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = |at: &i64| now_ms - at <= 2 * EVERY.as_millis() as i64;
        latest.as_ref().filter(|(at, _)| fresh(at)).map(|(_, messages)| messages.clone())
    }
}

/// One reading of the gauges.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub messages: Vec<(MessageState, u64)>,
    /// Seconds since the oldest due message of each lane became due (0 when none is due).
    pub oldest_due_secs: [(Lane, f64); 2],
    pub endpoints: Vec<(EndpointState, u64)>,
}

/// Reads the gauges from `db` at the pipeline's clock.
pub async fn read(pipeline: &Pipeline, db: &DatabaseConnection) -> Result<Reading, DbErr> {
    let now = pipeline.now_ms();
    let messages = gauges::by_state(db).await?;
    let mut oldest_due_secs = [(Lane::Fresh, 0.0), (Lane::Retry, 0.0)];
    for (lane, age) in &mut oldest_due_secs {
        if let Some(due) = gauges::oldest_due(db, *lane, now).await? {
            *age = (now - due).max(0) as f64 / 1000.0;
        }
    }
    Ok(Reading { messages, oldest_due_secs, endpoints: endpoints::count_by_state(db).await? })
}

fn lane_name(lane: Lane) -> &'static str {
    match lane {
        Lane::Fresh => "fresh",
        Lane::Retry => "retry",
    }
}

/// Sets the process's gauges to a reading.
pub fn publish(reading: &Reading) {
    for (state, n) in &reading.messages {
        metrics::gauge!("herald_messages", "state" => state.as_str()).set(*n as f64);
    }
    for (lane, secs) in reading.oldest_due_secs {
        metrics::gauge!("herald_oldest_due_seconds", "lane" => lane_name(lane)).set(secs);
    }
    for (state, n) in &reading.endpoints {
        metrics::gauge!("herald_endpoints", "state" => state.as_str()).set(*n as f64);
    }
}

/// The pool's connections: in use, and idle.
pub fn publish_pool(db: &DatabaseConnection) {
    let (size, idle) = match db.get_database_backend() {
        DbBackend::Postgres => {
            let pool = db.get_postgres_connection_pool();
            (pool.size(), pool.num_idle())
        }
        _ => {
            let pool = db.get_sqlite_connection_pool();
            (pool.size(), pool.num_idle())
        }
    };
    let idle = idle as u32;
    metrics::gauge!("herald_db_pool_connections", "state" => "in_use").set(size.saturating_sub(idle) as f64);
    metrics::gauge!("herald_db_pool_connections", "state" => "idle").set(idle as f64);
}

/// Reads from `db` and publishes every
/// [`EVERY`] until shutdown; skips while the database is away.
pub async fn run(pipeline: Pipeline, db: DatabaseConnection, mut shutdown: watch::Receiver<bool>) {
    loop {
        publish_pool(&pipeline.db);
        if !pipeline.health.is_down() {
            match read(&pipeline, &db).await {
                Ok(reading) => {
                    publish(&reading);
                    pipeline.gauges.set(pipeline.now_ms(), reading.messages);
                }
                Err(e) => pipeline.health.failed("reading the gauges", &e),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            return;
        }
    }
}
