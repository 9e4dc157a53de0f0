//! `herald-bench`: runs the real `herald` binary against a local receiver and
//! measures publish rate, end-to-end deliveries/s and publish→receipt latency,
//! beside the raw HTTP limit of the same receiver measured in the same run.

mod api;
mod db;
mod history;
mod measure;
mod process;
mod publisher;
mod receiver;
mod report;
mod retention;
mod scenarios;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

use clap::{Parser, ValueEnum};

/// One clock for the whole process, so publish and arrival times compare directly.
static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds since the benchmark started.
pub fn now_ns() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, BoxError>;

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Healthy subscriptions only, on an empty database.
    Steady,
    /// Half the subscriptions point at a blackhole, with a backlog of retries to it.
    DeadEndpoint,
    /// Messages scheduled for later already in the database.
    Backlog,
    /// One event at a time to one subscription on an otherwise idle server.
    Idle,
    /// A paced load (--rate events/s for --duration s) with history kept --retention-secs, then
    /// the same with everything kept: the database's size over time, and the latency of both.
    Retention,
    /// A burst of --dead-burst messages that die at their first attempt, each reported to a
    /// subscription naming `herald.message.dead`, while the measured load runs.
    DeadBurst,
    /// --history messages with their events and attempts loaded through the store's bulk insert,
    /// then every dashboard page and every list and search route of the API timed.
    History,
    /// Four subscriptions paced at --pace attempts a second, each with a backlog of
    /// --paced-events, beside the measured load's unpaced ones: the paced endpoints' largest count
    /// in any second, and the measured load's p99 against steady's.
    Paced,
    /// --replay-events kept events replayed to a paused subscription (a durable job, started just
    /// before the measured load): the job's rate during the load and to its end, and the measured
    /// load's p99 against steady's.
    Replay,
    /// steady, dead-endpoint, backlog and idle.
    All,
}

#[derive(Parser, Debug, Clone)]
#[command(name = "herald-bench", about = "Benchmark the herald binary against the raw HTTP limit of the same receiver")]
pub struct Opts {
    /// The herald binary (default: `herald` next to this executable).
    #[arg(long)]
    pub herald: Option<PathBuf>,
    /// Database for herald. Default: a temporary SQLite file per scenario. A postgres:// URL gets
    /// a fresh database created (and dropped) per scenario on that server.
    #[arg(long)]
    pub database_url: Option<String>,
    /// Events published in the measured phase.
    #[arg(long, default_value_t = 20_000)]
    pub events: usize,
    /// Concurrent publishing clients (and raw-limit clients).
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Subscriptions matching every event (each is its own endpoint).
    #[arg(long, default_value_t = 4)]
    pub subscriptions: usize,
    /// 0 publishes single events; B > 0 publishes application/cloudevents-batch+json arrays of B.
    #[arg(long, default_value_t = 0)]
    pub batch: usize,
    #[arg(long, value_enum, default_value_t = Scenario::Steady)]
    pub scenario: Scenario,
    /// A CEL filter on every subscription, which the bench's events should pass to be delivered,
    /// such as `message.source == "/bench" && message.data.seq >= 0`.
    #[arg(long)]
    pub filter: Option<String>,
    /// Put the published type in the catalog with a schema of ten properties, which every published
    /// event's data is checked against.
    #[arg(long)]
    pub schema: bool,
    /// Fields every subscription gets besides, as a JSON object, such as
    /// `{"signature":"v1a"}` or `{"headers":{"X-A":"1"},"auth":{"kind":"bearer","token":"t"}}`.
    #[arg(long, value_parser = subscription_fields)]
    pub subscription: Option<serde_json::Map<String, serde_json::Value>>,
    /// The paced scenario's pace, in attempts a second per paced endpoint.
    #[arg(long, default_value_t = 50)]
    pub pace: u32,
    /// Events of the paced scenario's backlog (each goes to its four paced endpoints).
    #[arg(long, default_value_t = 2_000)]
    pub paced_events: usize,
    /// Kept events the replay scenario replays.
    #[arg(long, default_value_t = 1_000_000)]
    pub replay_events: usize,
    /// Where to write the results as JSON.
    #[arg(long, default_value = "bench-results.json")]
    pub json: PathBuf,
    /// Messages scheduled for later before the `backlog` measurement.
    #[arg(long, default_value_t = 1_000_000)]
    pub backlog: usize,
    /// Messages in retry to the blackhole before the `dead-endpoint` measurement.
    #[arg(long, default_value_t = 10_000)]
    pub retries: usize,
    /// Events published one at a time in the `idle` measurement (at most --events).
    #[arg(long, default_value_t = 500)]
    pub idle_events: usize,
    /// Events per second of the `retention` scenario's paced load.
    #[arg(long, default_value_t = 1000)]
    pub rate: usize,
    /// Seconds the `retention` scenario's load runs.
    #[arg(long, default_value_t = 180)]
    pub duration: u64,
    /// Seconds the `retention` scenario keeps events and ended messages.
    #[arg(long, default_value_t = 30)]
    pub retention_secs: u64,
    /// Messages that die at once in the `dead-burst` measurement.
    #[arg(long, default_value_t = 10_000)]
    pub dead_burst: usize,
    /// Messages loaded before the `history` measurement.
    #[arg(long, default_value_t = 1_000_000)]
    pub history: usize,
    /// Customers sharing a tenth of the `history` messages (one customer holds the rest).
    #[arg(long, default_value_t = 99)]
    pub history_customers: usize,
    /// Times each request of the `history` scenario is made.
    #[arg(long, default_value_t = 5)]
    pub history_loads: usize,
    /// Messages of history (as the `history` scenario loads them) written for the publishing
    /// customer before the `steady` run: publishing and delivering beside a large history.
    #[arg(long, default_value_t = 0)]
    pub preload_history: usize,
    /// The share (percent) of the preloaded history past its retention when the `steady` run
    /// starts: herald is restarted to remove it, sweeping every second, during the run.
    #[arg(long, default_value_t = 0)]
    pub preload_expired: u8,
}

/// `--subscription`: a JSON object.
fn subscription_fields(text: &str) -> std::result::Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str(text) {
        Ok(serde_json::Value::Object(fields)) => Ok(fields),
        _ => Err("must be a JSON object of subscription fields".into()),
    }
}

fn main() -> std::process::ExitCode {
    let _ = now_ns();
    herald::tls::install_provider();
    let mut opts = Opts::parse();
    if opts.herald.is_none() {
        opts.herald = std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join("herald")));
    }
    if let Err(e) = validate(&opts) {
        eprintln!("herald-bench: {e}");
        return std::process::ExitCode::from(2);
    }
    // Two workers: the machine has two cores and herald needs its share.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    match runtime.map_err(BoxError::from).and_then(|rt| rt.block_on(run(opts))) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("herald-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn validate(opts: &Opts) -> std::result::Result<(), String> {
    let herald = opts.herald.as_ref().ok_or("cannot find the herald binary; pass --herald")?;
    if !herald.is_file() {
        return Err(format!(
            "{} is not a file; build it (cargo build --release -p server) or pass --herald",
            herald.display()
        ));
    }
    if opts.history_loads == 0 {
        return Err("--history-loads must be at least 1".into());
    }
    if opts.events == 0 || opts.concurrency == 0 || opts.subscriptions == 0 || opts.idle_events == 0 {
        return Err("--events, --concurrency, --subscriptions and --idle-events must be at least 1".into());
    }
    if opts.preload_expired > 100 {
        return Err("--preload-expired is a percentage, at most 100".into());
    }
    if opts.batch > 1000 {
        return Err("--batch is at most 1000 (herald's batch limit)".into());
    }
    let needs_dead = matches!(opts.scenario, Scenario::DeadEndpoint | Scenario::All);
    if needs_dead && opts.subscriptions < 2 {
        return Err("dead-endpoint needs --subscriptions of at least 2 (half of them are dead)".into());
    }
    Ok(())
}

async fn run(opts: Opts) -> Result<()> {
    if opts.scenario == Scenario::History {
        let (messages, database, timings) = history::run(&opts).await?;
        history::print(messages, &database, &timings);
        let json = serde_json::json!({"history": {"messages": messages, "database": database, "timings": timings}});
        std::fs::write(&opts.json, serde_json::to_string_pretty(&json)? + "\n")?;
        eprintln!("results written to {}", opts.json.display());
        return Ok(());
    }
    if opts.scenario == Scenario::Retention {
        let (with, without) = retention::run(&opts).await?;
        retention::print(&with, &without);
        std::fs::write(
            &opts.json,
            serde_json::to_string_pretty(&serde_json::json!({"retention": [with, without]}))? + "\n",
        )?;
        eprintln!("results written to {}", opts.json.display());
        return Ok(());
    }
    let plan: &[Scenario] = match opts.scenario {
        Scenario::Steady => &[Scenario::Steady],
        // The comparison needs a steady baseline from the same invocation.
        Scenario::DeadEndpoint => &[Scenario::Steady, Scenario::DeadEndpoint],
        Scenario::Backlog => &[Scenario::Steady, Scenario::Backlog],
        Scenario::Idle => &[Scenario::Idle],
        Scenario::DeadBurst => &[Scenario::Steady, Scenario::DeadBurst],
        Scenario::Paced => &[Scenario::Steady, Scenario::Paced],
        Scenario::Replay => &[Scenario::Steady, Scenario::Replay],
        // Measured above, on its own terms.
        Scenario::Retention | Scenario::History => &[],
        Scenario::All => &[Scenario::Steady, Scenario::DeadEndpoint, Scenario::Backlog, Scenario::Idle],
    };
    let mut rows = Vec::new();
    for &scenario in plan {
        eprintln!("== {}", report::name(scenario));
        rows.push(scenarios::run(scenario, &opts).await?);
    }
    let summary = report::BenchSummary::new(&opts, rows);
    summary.print();
    summary.write_json(&opts.json)?;
    eprintln!("results written to {}", opts.json.display());
    Ok(())
}
