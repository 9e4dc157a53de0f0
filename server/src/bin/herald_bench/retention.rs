//! The `retention` scenario: a paced load for `--duration` seconds against a
//! herald that keeps history for `--retention-secs` (sweeping every few
//! seconds), then the same load against one that keeps everything. It samples
//! the database's size on disk as it goes (the SQLite file with its
//! write-ahead log, or `pg_database_size`) and compares the delivery latency
//! of the two runs.

use std::path::Path;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};
use tokio::task::JoinSet;

use crate::api::Api;
use crate::db::Scratch;
use crate::measure::MAIN_TYPE;
use crate::process::Herald;
use crate::publisher::{self, BATCH, Sent, Target};
use crate::receiver::Receiver;
use crate::scenarios::start_herald;
use crate::{Opts, Result};

/// How often the publishers send a batch, and the database's size is sampled.
const TICK: Duration = Duration::from_millis(100);
const SAMPLE_EVERY: Duration = Duration::from_secs(10);

/// One run of the paced load.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Run {
    /// Seconds history is kept; `None`: everything is kept.
    pub retention_secs: Option<u64>,
    pub events: usize,
    pub deliveries: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// (seconds since the load started, database size in MB).
    pub sizes_mb: Vec<(f64, f64)>,
}

impl Run {
    /// The last size ÷ the size one retention period earlier.
    pub fn growth_over_last_period(&self) -> Option<f64> {
        let period = self.retention_secs? as f64;
        let &(last_t, last) = self.sizes_mb.last()?;
        let &(_, earlier) = self.sizes_mb.iter().rev().find(|(t, _)| *t <= last_t - period)?;
        (earlier > 0.0).then(|| last / earlier)
    }
}

/// Both runs, on fresh databases of the same kind.
pub async fn run(opts: &Opts) -> Result<(Run, Run)> {
    let with = one_run(opts, Some(opts.retention_secs)).await?;
    let without = one_run(opts, None).await?;
    Ok((with, without))
}

async fn one_run(opts: &Opts, retention_secs: Option<u64>) -> Result<Run> {
    eprintln!("== retention: {}", retention_secs.map_or("everything kept".into(), |s| format!("{s} s")));
    let receiver = Receiver::start().await?;
    let client = publisher::client(opts.concurrency);
    let env: Vec<(&str, String)> = match retention_secs {
        Some(secs) => vec![
            ("HERALD_RETENTION_MESSAGES_SECS", secs.to_string()),
            ("HERALD_RETENTION_EVENTS_SECS", secs.to_string()),
            ("HERALD_RETENTION_SWEEP_SECS", (secs / 6).max(1).to_string()),
        ],
        None => Vec::new(),
    };
    let (herald, scratch) = start_herald(opts, &env).await?;
    let measured = paced_load(opts, &client, &receiver, &herald, &scratch, retention_secs).await;
    herald.stop().await;
    scratch.remove(measured.is_err()).await;
    measured
}

async fn paced_load(
    opts: &Opts,
    client: &reqwest::Client,
    receiver: &Receiver,
    herald: &Herald,
    scratch: &Scratch,
    retention_secs: Option<u64>,
) -> Result<Run> {
    let api = Api::new_customer(client.clone(), &herald.base, &herald.admin_token).await?;
    for i in 0..opts.subscriptions {
        api.subscribe(&receiver.url(&format!("/hook/{i}")), MAIN_TYPE, None).await?;
    }
    let target = Target {
        url: format!("{}/api/v1/events", herald.base),
        bearer: Some(api.token.clone()),
        content_type: BATCH,
        id_prefix: None,
    };
    let per_tick = (opts.rate as f64 * TICK.as_secs_f64()).ceil().max(1.0) as usize;
    let run_id = format!("r{}", retention_secs.unwrap_or(0));
    let started = Instant::now();
    let mut ticks = tokio::time::interval(TICK);
    let mut posts: JoinSet<Sent> = JoinSet::new();
    let mut sizes_mb = Vec::new();
    let mut next_sample = Duration::ZERO;
    let mut seq = 0;
    let mut sent = Vec::new();
    while started.elapsed() < Duration::from_secs(opts.duration) {
        ticks.tick().await;
        let body = Bytes::from(publisher::batch(&run_id, MAIN_TYPE, seq, seq + per_tick));
        seq += per_tick;
        let (client, target) = (client.clone(), target.clone());
        posts.spawn(async move { publisher::post_one(&client, &target, body, 0, true).await });
        while let Some(done) = posts.try_join_next() {
            sent.push(done?);
        }
        if started.elapsed() >= next_sample {
            let mb = size_mb(&scratch.database_url, &scratch.dir).await?;
            sizes_mb.push((started.elapsed().as_secs_f64(), mb));
            eprintln!(
                "  {:>5.0} s: {mb:.1} MB, {} deliveries",
                started.elapsed().as_secs_f64(),
                receiver.tallies.ok.distinct()
            );
            next_sample += SAMPLE_EVERY;
        }
    }
    while let Some(done) = posts.join_next().await {
        sent.push(done?);
    }
    let (ids, events) = publisher::message_ids(&sent);
    let ok = &receiver.tallies.ok;
    ok.wait_for(ids.len() as u64, Duration::from_secs(60)).await;
    let arrivals = ok.take();
    let mut latencies_us: Vec<u64> =
        ids.iter().filter_map(|(id, start)| arrivals.get(id).map(|&at| at.saturating_sub(*start) / 1000)).collect();
    latencies_us.sort_unstable();
    let percentile = |q: f64| {
        let rank = ((q * latencies_us.len() as f64).ceil() as usize).clamp(1, latencies_us.len().max(1));
        latencies_us.get(rank - 1).map_or(0.0, |&us| us as f64 / 1000.0)
    };
    Ok(Run {
        retention_secs,
        events,
        deliveries: latencies_us.len(),
        p50_ms: percentile(0.50),
        p99_ms: percentile(0.99),
        sizes_mb,
    })
}

/// The database's size on disk: the SQLite file and its write-ahead log, or `pg_database_size`.
async fn size_mb(database_url: &str, dir: &Path) -> Result<f64> {
    if database_url.starts_with("postgres") {
        let db = Database::connect(database_url).await?;
        let row = db
            .query_one_raw(Statement::from_string(
                DbBackend::Postgres,
                "SELECT pg_database_size(current_database())::bigint AS bytes",
            ))
            .await?
            .ok_or("no size")?;
        let bytes: i64 = row.try_get("", "bytes")?;
        db.close().await?;
        return Ok(bytes as f64 / 1e6);
    }
    let mut bytes = 0;
    for name in ["bench.db", "bench.db-wal"] {
        bytes += std::fs::metadata(dir.join(name)).map(|m| m.len()).unwrap_or(0);
    }
    Ok(bytes as f64 / 1e6)
}

/// The two runs side by side, with the goals they are measured against.
pub fn print(with: &Run, without: &Run) {
    println!("\nretention: {} and {} events published, database size in MB", with.events, without.events);
    println!("{:>8} {:>14} {:>14}", "t s", "kept forever", format!("kept {} s", with.retention_secs.unwrap_or(0)));
    for (i, (t, mb)) in with.sizes_mb.iter().enumerate() {
        let forever = without.sizes_mb.get(i).map_or("-".into(), |(_, mb)| format!("{mb:.1}"));
        println!("{t:>8.0} {forever:>14} {mb:>14.1}");
    }
    let growth = with.growth_over_last_period().map_or("-".into(), |g| format!("{g:.2}"));
    let p99_ratio = if without.p99_ms > 0.0 { with.p99_ms / without.p99_ms } else { 0.0 };
    println!(
        "last size / size one period earlier: {growth} (goal <= 1.10); p99 {:.1} ms with sweeps, {:.1} ms without: \
         x{p99_ratio:.2} (goal < 1.20); p50 {:.1} and {:.1} ms; {} and {} deliveries",
        with.p99_ms, without.p99_ms, with.p50_ms, without.p50_ms, with.deliveries, without.deliveries
    );
}
