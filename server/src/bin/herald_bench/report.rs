//! Results: one row per scenario, the comparisons the targets are stated in,
//! a table on stdout and the same as JSON.

use std::path::Path;

use serde::Serialize;

use crate::measure::Measured;
use crate::{Opts, Result, Scenario};

#[derive(Serialize, Clone)]
pub struct Row {
    pub scenario: &'static str,
    pub database: String,
    /// `off` when the scenario raised the breaker's thresholds out of reach.
    pub breaker: &'static str,
    pub events: usize,
    pub batch: usize,
    pub concurrency: usize,
    pub healthy_subscriptions: usize,
    pub dead_subscriptions: usize,
    /// Retries (dead-endpoint) or messages scheduled for later (backlog) in place before the run.
    pub preloaded_messages: usize,
    pub prep_secs: Option<f64>,
    pub publish_errors: usize,
    pub publish_per_s: f64,
    pub expected_deliveries: usize,
    pub deliveries: usize,
    pub deliveries_per_s: f64,
    pub raw_requests_per_s: f64,
    /// deliveries_per_s / raw_requests_per_s.
    pub ratio: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub duplicates: u64,
    /// Herald's user + system CPU during the measured phase.
    pub cpu_s: f64,
    /// Herald's peak RSS during the measured phase, and during the preparation.
    pub rss_peak_mb: f64,
    pub rss_peak_prep_mb: Option<f64>,
    /// dead-burst: seconds from the burst's publish to its last failed attempt; the dead
    /// messages reported (distinct `data.message_id`), reports of a message already reported,
    /// and seconds from the burst's publish to its last report.
    pub dead_burst_failed_secs: Option<f64>,
    pub dead_reported: Option<u64>,
    pub dead_reported_twice: Option<u64>,
    pub dead_burst_secs: Option<f64>,
    /// steady with --preload-history: the messages of history in the database, those retention
    /// removed during the run (--preload-expired), and at what rate.
    pub preloaded_history: usize,
    pub swept_messages: Option<u64>,
    pub sweep_per_s: Option<f64>,
    /// paced: the pace set, and the largest count of a paced endpoint's arrivals within any second.
    pub pace_per_s: Option<u32>,
    pub paced_max_per_s: Option<u64>,
    /// replay: the events the job replayed by the end of the measured load, at what rate, and
    /// the seconds it took to replay all of them (`None` if it had not ended 15 minutes later).
    pub replayed_during_load: Option<u64>,
    pub replay_per_s_during_load: Option<f64>,
    pub replay_total_secs: Option<f64>,
}

pub fn name(s: Scenario) -> &'static str {
    match s {
        Scenario::Steady => "steady",
        Scenario::DeadEndpoint => "dead-endpoint",
        Scenario::Backlog => "backlog",
        Scenario::Idle => "idle",
        Scenario::DeadBurst => "dead-burst",
        Scenario::Retention => "retention",
        Scenario::History => "history",
        Scenario::Paced => "paced",
        Scenario::Replay => "replay",
        Scenario::All => "all",
    }
}

fn percentile_ms(sorted_us: &[u64], q: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted_us.len() as f64).ceil() as usize).clamp(1, sorted_us.len());
    sorted_us[rank - 1] as f64 / 1000.0
}

#[allow(clippy::too_many_arguments)]
pub fn row(
    scenario: Scenario,
    opts: &Opts,
    healthy: usize,
    dead: usize,
    preloaded: usize,
    prep_secs: Option<f64>,
    rss_peak_prep_mb: Option<f64>,
    raw: f64,
    m: Measured,
) -> Row {
    let lat = &m.latencies_us;
    Row {
        scenario: name(scenario),
        database: String::new(),
        breaker: "default",
        events: if scenario == Scenario::Idle { opts.idle_events.min(opts.events) } else { opts.events },
        batch: opts.batch,
        concurrency: if scenario == Scenario::Idle { 1 } else { opts.concurrency },
        healthy_subscriptions: healthy,
        dead_subscriptions: dead,
        preloaded_messages: preloaded,
        prep_secs,
        publish_errors: m.publish_errors,
        publish_per_s: m.publish_per_s,
        expected_deliveries: m.expected,
        deliveries: lat.len(),
        deliveries_per_s: m.deliveries_per_s,
        raw_requests_per_s: raw,
        ratio: if raw > 0.0 { m.deliveries_per_s / raw } else { 0.0 },
        p50_ms: percentile_ms(lat, 0.50),
        p90_ms: percentile_ms(lat, 0.90),
        p99_ms: percentile_ms(lat, 0.99),
        max_ms: percentile_ms(lat, 1.0),
        duplicates: m.duplicates,
        cpu_s: m.cpu_s,
        rss_peak_mb: m.rss_peak_mb,
        rss_peak_prep_mb,
        dead_burst_failed_secs: None,
        dead_reported: None,
        dead_reported_twice: None,
        dead_burst_secs: None,
        preloaded_history: 0,
        swept_messages: None,
        sweep_per_s: None,
        pace_per_s: None,
        paced_max_per_s: None,
        replayed_during_load: None,
        replay_per_s_during_load: None,
        replay_total_secs: None,
    }
}

/// The ratios the targets are stated in, against the steady run of the same invocation.
#[derive(Serialize, Default)]
pub struct Comparisons {
    /// Healthy endpoints' p99 with the dead endpoint ÷ steady p99 (target ≤ 1.5).
    pub dead_endpoint_p99_ratio: Option<f64>,
    pub dead_endpoint_p50_ratio: Option<f64>,
    /// Deliveries/s with the backlog ÷ steady deliveries/s (target ≥ 0.8).
    pub backlog_throughput_ratio: Option<f64>,
    /// Herald's peak RSS during the backlog run (target ≤ 150 MB).
    pub backlog_rss_peak_mb: Option<f64>,
    /// Publish→receipt on an idle server (targets: p50 ≤ 1.5 ms, p99 ≤ 5 ms).
    pub idle_p50_ms: Option<f64>,
    pub idle_p99_ms: Option<f64>,
    /// The measured load's deliveries/s and p99 during the burst ÷ steady's.
    pub dead_burst_throughput_ratio: Option<f64>,
    pub dead_burst_p99_ratio: Option<f64>,
    /// The measured load's p99 beside paced endpoints ÷ steady p99 (target ≤ 1.2).
    pub paced_p99_ratio: Option<f64>,
    /// The measured load's p99 while a replay job runs ÷ steady p99 (target ≤ 1.5).
    pub replay_p99_ratio: Option<f64>,
}

#[derive(Serialize)]
pub struct BenchSummary {
    pub started_at: String,
    pub herald: String,
    pub cpus: usize,
    pub runs: Vec<Row>,
    pub comparisons: Comparisons,
}

impl BenchSummary {
    pub fn new(opts: &Opts, runs: Vec<Row>) -> BenchSummary {
        let find = |n: &str| runs.iter().find(|r| r.scenario == n);
        let mut c = Comparisons::default();
        if let Some(steady) = find("steady") {
            let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
            if let Some(dead) = find("dead-endpoint") {
                c.dead_endpoint_p99_ratio = ratio(dead.p99_ms, steady.p99_ms);
                c.dead_endpoint_p50_ratio = ratio(dead.p50_ms, steady.p50_ms);
            }
            if let Some(burst) = find("dead-burst") {
                c.dead_burst_throughput_ratio = ratio(burst.deliveries_per_s, steady.deliveries_per_s);
                c.dead_burst_p99_ratio = ratio(burst.p99_ms, steady.p99_ms);
            }
            if let Some(replay) = find("replay") {
                c.replay_p99_ratio = ratio(replay.p99_ms, steady.p99_ms);
            }
            if let Some(paced) = find("paced") {
                c.paced_p99_ratio = ratio(paced.p99_ms, steady.p99_ms);
            }
            if let Some(backlog) = find("backlog") {
                c.backlog_throughput_ratio = ratio(backlog.deliveries_per_s, steady.deliveries_per_s);
                c.backlog_rss_peak_mb = Some(backlog.rss_peak_mb);
            }
        }
        if let Some(idle) = find("idle") {
            c.idle_p50_ms = Some(idle.p50_ms);
            c.idle_p99_ms = Some(idle.p99_ms);
        }
        BenchSummary {
            started_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            herald: opts.herald.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
            cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            runs,
            comparisons: c,
        }
    }

    pub fn print(&self) {
        println!(
            "\n{:<14} {:>8} {:>10} {:>12} {:>10} {:>7} {:>8} {:>8} {:>8} {:>8} {:>6} {:>7} {:>8}",
            "scenario",
            "db",
            "publish/s",
            "deliveries/s",
            "raw req/s",
            "ratio",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "max ms",
            "dupes",
            "cpu s",
            "rss MB"
        );
        for r in &self.runs {
            println!(
                "{:<14} {:>8} {:>10.0} {:>12.0} {:>10.0} {:>7.4} {:>8.2} {:>8.2} {:>8.2} {:>8.1} {:>6} {:>7.2} {:>8.1}",
                r.scenario,
                r.database,
                r.publish_per_s,
                r.deliveries_per_s,
                r.raw_requests_per_s,
                r.ratio,
                r.p50_ms,
                r.p90_ms,
                r.p99_ms,
                r.max_ms,
                r.duplicates,
                r.cpu_s,
                r.rss_peak_mb
            );
        }
        self.print_findings();
    }

    /// What each run's scenario reports beyond the table, and the ratios to steady.
    fn print_findings(&self) {
        for r in self.runs.iter().filter(|r| r.deliveries < r.expected_deliveries || r.publish_errors > 0) {
            println!(
                "! {}: {} of {} deliveries arrived, {} publishes failed",
                r.scenario, r.deliveries, r.expected_deliveries, r.publish_errors
            );
        }
        let c = &self.comparisons;
        if let Some(x) = c.dead_endpoint_p99_ratio {
            let p50 = c.dead_endpoint_p50_ratio.unwrap_or(0.0);
            println!("dead-endpoint: healthy p99 / steady p99 = {x:.2} (target <= 1.5); p50 ratio {p50:.2}");
        }
        if let Some(x) = c.backlog_throughput_ratio {
            let rss = c.backlog_rss_peak_mb.unwrap_or(0.0);
            println!("backlog: deliveries/s / steady = {x:.2} (target >= 0.8); peak RSS {rss:.1} MB (target <= 150)");
        }
        for r in self.runs.iter().filter(|r| r.scenario == "dead-burst") {
            let (reported, twice) = (r.dead_reported.unwrap_or(0), r.dead_reported_twice.unwrap_or(0));
            let secs = |s: Option<f64>| s.map_or("-".into(), |s| format!("{s:.1} s"));
            println!(
                "dead-burst: {} messages failed, the last after {}; {reported} reported, {twice} twice, the last \
                 after {}; deliveries/s {:.2} and p99 {:.2} x steady",
                r.preloaded_messages,
                secs(r.dead_burst_failed_secs),
                secs(r.dead_burst_secs),
                c.dead_burst_throughput_ratio.unwrap_or(0.0),
                c.dead_burst_p99_ratio.unwrap_or(0.0),
            );
        }
        for r in self.runs.iter().filter(|r| r.preloaded_history > 0) {
            let swept = match (r.swept_messages, r.sweep_per_s) {
                (Some(n), Some(rate)) if n > 0 => format!("; retention removed {n} messages meanwhile, {rate:.0}/s"),
                _ => String::new(),
            };
            println!("{}: beside {} messages of history{swept}", r.scenario, r.preloaded_history);
        }
        for r in self.runs.iter().filter(|r| r.scenario == "paced") {
            println!(
                "paced: at most {} attempts in any second to an endpoint paced at {}/s (target <= 1.1 x); the unpaced \
                 load's p99 {:.2} x steady (target <= 1.2)",
                r.paced_max_per_s.unwrap_or(0),
                r.pace_per_s.unwrap_or(0),
                c.paced_p99_ratio.unwrap_or(0.0),
            );
        }
        for r in self.runs.iter().filter(|r| r.scenario == "replay") {
            let total = r.replay_total_secs.map_or("did not end within 15 minutes".into(), |secs| {
                format!("all {} in {secs:.1} s ({:.0}/s)", r.preloaded_messages, r.preloaded_messages as f64 / secs)
            });
            println!(
                "replay: {} events replayed during the load, {:.0}/s (target >= 5000 on SQLite); {total}; the load's \
                 p99 {:.2} x steady (target <= 1.5)",
                r.replayed_during_load.unwrap_or(0),
                r.replay_per_s_during_load.unwrap_or(0.0),
                c.replay_p99_ratio.unwrap_or(0.0),
            );
        }
        if let (Some(p50), Some(p99)) = (c.idle_p50_ms, c.idle_p99_ms) {
            println!("idle: publish -> receipt p50 {p50:.2} ms (target <= 1.5), p99 {p99:.2} ms (target <= 5)");
        }
    }

    pub fn write_json(&self, path: &Path) -> Result<()> {
        std::fs::write(path, serde_json::to_string_pretty(self)? + "\n")?;
        Ok(())
    }
}
