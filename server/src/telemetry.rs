//! Logs (tracing) and metrics (Prometheus), set up once per process.

use std::io::IsTerminal;
use std::sync::{LazyLock, OnceLock};

use domain::health::ATTEMPT_CLASSES;
use domain::policy::DeadReason;
use domain::states::Outcome;
use metrics::{Counter, Histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::store::messages::Lane;

pub fn init_logging() {
    // Herald reports the database's failures itself (once per outage, see `store::health`);
    // sqlx would warn again for every pooled connection an outage breaks.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=error,sea_orm=warn"));
    // Colour only on a terminal: a log written to a file or a pipe (journald, a collector) carries
    // no escape codes.
    let ansi = std::io::stdout().is_terminal();
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).with_ansi(ansi).try_init();
}

/// The process-wide Prometheus recorder; several applications in one test
/// process share it.
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// The metrics recorded for every publish and every delivery, looked up once. A metric named
/// in a `metrics::counter!` call is found by hashing its name and labels at each call; these
/// handles point at it directly. Registered up front, every label set shows from the start, at
/// zero until it counts (as Prometheus advises for labels known in advance).
pub struct Hot {
    /// By outcome, then by class: made at the first attempt of each pair, since most pairs
    /// never happen (a `success` that is `5xx`).
    attempts: [[OnceLock<Counter>; ATTEMPT_CLASSES.len()]; Outcome::ALL.len()],
    /// By lane (fresh, retry) and by whether the claim found messages.
    claims: [[Counter; 2]; 2],
    pub delivery_latency: Histogram,
    pub record_batch: Histogram,
    pub publish_batch: Histogram,
    pub events_published: Counter,
    pub messages_created: Counter,
    /// Events a filter failed on (a missing key, a type mismatch), which it did not match.
    pub filter_errors: Counter,
}

impl Hot {
    /// `class` is one of [`ATTEMPT_CLASSES`] (see `domain::health::attempt_class`).
    pub fn attempts(&self, outcome: Outcome, class: &'static str) -> &Counter {
        let o = Outcome::ALL.iter().position(|o| *o == outcome).expect("every outcome is listed");
        let c = ATTEMPT_CLASSES.iter().position(|c| *c == class).unwrap_or(ATTEMPT_CLASSES.len() - 1);
        self.attempts[o][c].get_or_init(
            || metrics::counter!("herald_attempts_total", "outcome" => outcome.as_str(), "class" => ATTEMPT_CLASSES[c]),
        )
    }

    pub fn claims(&self, lane: Lane, found: bool) -> &Counter {
        &self.claims[usize::from(lane == Lane::Retry)][usize::from(found)]
    }
}

/// Messages that became dead, by reason (registered at zero by [`hot`]).
pub fn dead_messages(reason: DeadReason) -> Counter {
    metrics::counter!("herald_dead_messages_total", "reason" => reason.as_str())
}

/// The handles, registered with the process-wide recorder (installed first).
pub fn hot() -> &'static Hot {
    static HOT: LazyLock<Hot> = LazyLock::new(|| {
        metrics_handle();
        // Counters of rare events start at zero, so that their rates exist before the first one.
        for &reason in DeadReason::ALL {
            dead_messages(reason).absolute(0);
        }
        metrics::counter!("herald_db_errors_total").absolute(0);
        metrics::counter!("herald_filter_errors_total").absolute(0);
        for kind in ["messages", "attempts", "events"] {
            metrics::counter!("herald_retention_removed_total", "kind" => kind).absolute(0);
        }
        let claims = |lane: &'static str| {
            [false, true]
                .map(|found| metrics::counter!("herald_claims_total", "lane" => lane, "found" => found.to_string()))
        };
        Hot {
            attempts: Default::default(),
            claims: [claims("fresh"), claims("retry")],
            delivery_latency: metrics::histogram!("herald_delivery_latency_seconds"),
            record_batch: metrics::histogram!("herald_record_batch_size"),
            publish_batch: metrics::histogram!("herald_publish_batch_events"),
            events_published: metrics::counter!("herald_events_published_total"),
            messages_created: metrics::counter!("herald_messages_created_total"),
            filter_errors: metrics::counter!("herald_filter_errors_total"),
        }
    });
    &HOT
}
