//! The delivery engine: everything from a publish's commit to an attempt's
//! record, as one subsystem behind a small surface.
//!
//! - [`Pipeline`] is the handle the layers above hold: [`Pipeline::publish`]
//!   writes events and their messages by group commit, and its `wake` tells
//!   the lanes that messages came due.
//! - [`Lanes`] runs the two lanes (first attempts, retries) that deliver them.
//!
//! Inside, one event goes `intake` (group commit, routed by `routes`) →
//! `handoff` (leased at publish, passed in memory) or the database → `lanes`
//! (claim, wait for an endpoint permit) → `deliver` (the circuit's gate,
//! `send`, `decide`) → `recorder` (group commit of attempts and circuits).
//! Nothing here calls the services, the API or the dashboard.

mod decide;
mod deliver;
pub mod endpoint_paces;
pub mod endpoint_permits;
pub mod gauges;
mod group_commit;
pub mod handoff;
pub mod heartbeat;
mod intake;
mod job;
mod lanes;
pub mod operational;
mod recorder;
pub mod replays;
pub mod retention;
mod retry_times;
mod routes;
mod send;
pub mod spans;
mod wakeup;

use std::sync::Arc;

use domain::dto::PublishResult;
use domain::event::CloudEvent;
use domain::ids::CustomerId;
use sea_orm::{DatabaseConnection, DatabaseTransaction, DbErr};

use crate::clock::SharedClock;
use crate::config::{DeliverySettings, Settings};
use crate::secrets::Sealer;
use crate::store::health::DatabaseHealth;
pub use crate::store::messages::Lane;
use crate::store::notify;
use crate::store::wal_flush::WalFlush;
use endpoint_paces::EndpointPaces;
use handoff::Handoff;
use intake::Intake;
pub use lanes::Lanes;
pub use routes::StoredFilter;
use spans::Spans;
pub use wakeup::{Due, Wakeup};

/// How long a claim may stay unfinished before another worker takes it over:
/// the longest timeout a subscription can have, plus the grace.
pub fn lease_ms(delivery: &DeliverySettings) -> i64 {
    60_000 + delivery.lease_grace_secs as i64 * 1000
}

/// Why a publish stored nothing.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PublishError {
    /// The customer's subscriptions kept changing while the batch was routed.
    #[error("{0}")]
    Conflict(String),
    #[error("database: {0}")]
    Db(#[from] DbErr),
    /// The database is away (see [`DatabaseHealth`]); nothing was tried.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    /// Events (by their place in the request) whose data breaks their type's schema, each with
    /// why; nothing of the request was stored.
    #[error("the data of {} events breaks their type's schema", .0.len())]
    Invalid(Vec<(usize, Vec<String>)>),
}

/// The pipeline's shared parts; cloning the handle copies one reference count.
#[derive(Clone)]
pub struct Pipeline(Arc<Parts>);

pub struct Parts {
    pub db: DatabaseConnection,
    pub settings: Arc<Settings>,
    pub clock: SharedClock,
    /// Opens subscription secrets to sign requests.
    pub sealer: Arc<Sealer>,
    /// Wakes the lanes the moment messages are committed.
    pub wake: Arc<Wakeup>,
    /// Passes fresh messages from the intake to the running fresh lane.
    pub handoff: Arc<Handoff>,
    /// Whether the database answers; the workers wait on it during an outage.
    pub health: Arc<DatabaseHealth>,
    /// This process's number among those sharing the database (0 on SQLite, which has one):
    /// the upper half of every lease token it draws.
    pub process: i32,
    /// Where spans are exported, when `otlp_endpoint` is set.
    pub spans: Option<Arc<Spans>>,
    /// The gauges' latest messages by state.
    pub gauges: Arc<gauges::Latest>,
    /// Each paced endpoint's next turn, shared by both lanes.
    pub paces: EndpointPaces,
    /// Wakes this process's replay runner when a job is stored.
    pub replay_wake: Arc<tokio::sync::Notify>,
    /// Flushes SQLite's log before an answer, when Herald (not each commit) makes answers durable.
    pub wal: Option<Arc<WalFlush>>,
    intake: Intake,
}

impl std::ops::Deref for Pipeline {
    type Target = Parts;

    fn deref(&self) -> &Parts {
        &self.0
    }
}

impl Pipeline {
    /// Commits `txn` and wakes the lanes for what it made due: other processes by a NOTIFY sent
    /// in the transaction (so at its commit, never before), this one's after the commit.
    pub async fn commit_and_wake(&self, txn: DatabaseTransaction, due: Due) -> Result<(), DbErr> {
        if due.is_news() {
            notify::send(&txn, self.wake.origin()).await?;
        }
        txn.commit().await?;
        self.wake.woken(due);
        Ok(())
    }

    /// Starts the intake's task; the lanes start with [`Lanes::run`].
    pub fn start(
        db: DatabaseConnection,
        settings: Arc<Settings>,
        clock: SharedClock,
        sealer: Arc<Sealer>,
        process: i32,
    ) -> Pipeline {
        let wal = WalFlush::for_settings(&settings).map(Arc::new);
        let wake = Arc::new(Wakeup::default());
        let handoff = Arc::new(Handoff::default());
        let health = DatabaseHealth::new(db.clone(), &settings);
        let spans = settings.otlp_endpoint.as_deref().and_then(|endpoint| match Spans::start(endpoint) {
            Ok(spans) => Some(Arc::new(spans)),
            Err(e) => {
                tracing::error!(error = %e, "spans cannot be exported to otlp_endpoint; going on without");
                None
            }
        });
        let intake = Intake::spawn(intake::IntakeContext {
            db: db.clone(),
            health: health.clone(),
            clock: clock.clone(),
            wake: wake.clone(),
            handoff: handoff.clone(),
            lease_ms: lease_ms(&settings.delivery),
            process,
            spans: spans.clone(),
            wal: wal.clone(),
        });
        let (gauges, paces) = (Arc::default(), EndpointPaces::default());
        let replay_wake = Arc::default();
        let parts = Parts {
            db,
            settings,
            clock,
            sealer,
            wake,
            handoff,
            health,
            process,
            spans,
            gauges,
            paces,
            replay_wake,
            wal,
            intake,
        };
        Pipeline(Arc::new(parts))
    }

    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Stores the events and their messages for the customer; returns once
    /// they are committed (an acknowledged event is never lost).
    pub async fn publish(
        &self,
        customer_id: CustomerId,
        events: Vec<CloudEvent>,
    ) -> Result<PublishResult, PublishError> {
        self.intake.publish(customer_id, events).await
    }
}
