//! One scenario from start to finish: raw limit, a fresh herald on a fresh
//! database, subscriptions, the scenario's preparation, the measured run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;

use crate::api::Api;
use crate::db::Scratch;
use crate::history;
use crate::measure::{self, MAIN_TYPE};
use crate::process::Herald;
use crate::publisher::{self, BATCH, SINGLE, Target};
use crate::receiver::{Arrivals, Blackhole, Receiver};
use crate::report::{self, Row};
use crate::{Opts, Result, Scenario};

const PREP_TYPE: &str = "bench.prep";
const LATER_TYPE: &str = "bench.later";
const PACED_TYPE: &str = "bench.paced";
const ARCHIVE_TYPE: &str = "bench.archive";
/// Events per request of the replay scenario's archive (no subscription takes them when published).
const ARCHIVE_BATCH: usize = 1000;
/// How long the replay scenario waits for its job to end after the measured load.
const REPLAY_END_WAIT: Duration = Duration::from_secs(15 * 60);
/// The paced scenario's paced endpoints.
const PACED_ENDPOINTS: usize = 4;
/// Preparation fans each event out to this many endpoints: herald bounds the
/// attempts in flight per endpoint, so one endpoint would make it slow.
const PREP_FANOUT: usize = 16;
/// Events per preparation batch: 1000 messages a request, as larger inserts
/// exceed SQLite's limit on statement variables.
const PREP_BATCH: usize = 1000 / PREP_FANOUT;

/// The breaker would disable the blackhole (and the 503 endpoint of `backlog`) after about a
/// hundred failures; these scenarios measure the lanes and the database instead, so its
/// thresholds are set out of reach.
fn breaker_off() -> Vec<(&'static str, String)> {
    let never = "1000000000".to_string();
    vec![
        ("HERALD_BREAKER_FAILURE_RATE", "1.0".into()),
        ("HERALD_BREAKER_MIN_ATTEMPTS", never.clone()),
        ("HERALD_BREAKER_DISABLE_CONSECUTIVE", never.clone()),
        ("HERALD_BREAKER_LOCK_CONSECUTIVE", never.clone()),
        ("HERALD_BREAKER_LOCK_CONSECUTIVE_ANY", never),
    ]
}

pub async fn run(scenario: Scenario, opts: &Opts) -> Result<Row> {
    let receiver = Receiver::start().await?;
    let client = publisher::client(opts.concurrency);
    let singles: Arc<Vec<Bytes>> =
        Arc::new((0..opts.events).map(|i| Bytes::from(publisher::event("main", MAIN_TYPE, i))).collect());
    let raw_per_s = raw_limit(&client, &receiver, &singles, opts).await?;
    eprintln!("raw limit: {raw_per_s:.0} requests/s");

    let env = if matches!(scenario, Scenario::Steady | Scenario::Idle) { Vec::new() } else { breaker_off() };
    let (mut herald, scratch) = start_herald(opts, &env).await?;
    let row = drive(scenario, opts, &client, &receiver, &mut herald, &scratch, &singles, raw_per_s).await;
    let row = row.map(|mut r| {
        r.breaker = if env.is_empty() { "default" } else { "off" };
        r.database = scratch.database_url.split(':').next().unwrap_or("").to_owned();
        r
    });
    herald.stop().await;
    let incomplete = row.as_ref().map_or(true, |r| r.deliveries < r.expected_deliveries || r.publish_errors > 0);
    scratch.remove(incomplete).await;
    row
}

/// A fresh database and herald on it with the extra environment `env`; when herald does not
/// start, the database and its log are kept for inspection.
pub async fn start_herald(opts: &Opts, env: &[(&str, String)]) -> Result<(Herald, Scratch)> {
    let scratch = Scratch::new(opts.database_url.as_deref()).await?;
    let bin = opts.herald.as_deref().expect("validated in main");
    match Herald::start(bin, &scratch.database_url, env, scratch.dir.join("herald.log")).await {
        Ok(herald) => Ok((herald, scratch)),
        Err(e) => {
            scratch.remove(true).await;
            Err(e)
        }
    }
}

/// The same client and bodies, straight to the receiver: the ceiling for this machine.
async fn raw_limit(
    client: &reqwest::Client,
    receiver: &Receiver,
    singles: &Arc<Vec<Bytes>>,
    opts: &Opts,
) -> Result<f64> {
    let target =
        Target { url: receiver.url("/raw"), bearer: None, content_type: SINGLE, id_prefix: Some("raw-".into()) };
    let bodies = singles.clone();
    let sent = publisher::post_all(
        client,
        &target,
        opts.events,
        opts.concurrency,
        Arc::new(move |i| bodies[i].clone()),
        false,
    )
    .await;
    receiver.tallies.ok.take();
    match publisher::failures(&sent) {
        (0, _) => Ok(publisher::rate(&sent, sent.len())),
        (n, first) => Err(format!("raw limit: {n} requests failed, first: {}", first.unwrap_or_default()).into()),
    }
}

/// Subscribes, prepares what the scenario needs, runs the measured load and fills in the row.
#[allow(clippy::too_many_arguments)]
async fn drive(
    scenario: Scenario,
    opts: &Opts,
    client: &reqwest::Client,
    receiver: &Receiver,
    herald: &mut Herald,
    scratch: &Scratch,
    singles: &Arc<Vec<Bytes>>,
    raw_per_s: f64,
) -> Result<Row> {
    let mut api = Api::new_customer(client.clone(), &herald.base, &herald.admin_token).await?;
    api.filter = opts.filter.clone();
    api.extra = opts.subscription.clone().unwrap_or_default();
    if opts.schema {
        api.catalog_with_schema(MAIN_TYPE).await?;
    }
    let dead = if scenario == Scenario::DeadEndpoint { opts.subscriptions / 2 } else { 0 };
    let healthy = if scenario == Scenario::Idle { 1 } else { opts.subscriptions - dead };
    // A path per subscription, so each is an endpoint of its own as with real customers.
    for i in 0..healthy {
        api.subscribe(&receiver.url(&format!("/hook/{i}")), MAIN_TYPE, None).await?;
    }
    let history = if scenario == Scenario::Steady && opts.preload_history > 0 {
        Some(preload_history(opts, client, herald, scratch, &mut api).await?)
    } else {
        None
    };
    let measured_from = Instant::now();
    let started = Instant::now();
    let burst_ns = crate::now_ns();
    let (preloaded, _blackhole) = prepare(scenario, opts, &api, receiver, dead).await?;
    // The replay starts last, so that the measured load runs beside it from its first batch.
    let replay = if scenario == Scenario::Replay { Some(start_replay(&api, receiver).await?) } else { None };
    let prep_secs = (preloaded > 0).then(|| started.elapsed().as_secs_f64());
    if let Some(secs) = prep_secs {
        eprintln!("preparation: {preloaded} messages in {secs:.1} s");
    }
    let rss_prep_mb = (preloaded > 0).then(|| herald.peak_rss_mb());

    let bodies = measured_bodies(opts, singles);
    let target = Target {
        url: format!("{}/api/v1/events", herald.base),
        bearer: Some(api.token.clone()),
        content_type: if opts.batch == 0 { SINGLE } else { BATCH },
        id_prefix: None,
    };
    let m = if scenario == Scenario::Idle {
        measure::idle(client, &target, &bodies[..opts.idle_events.min(bodies.len())], receiver, herald).await?
    } else {
        measure::run(client, &target, bodies, opts.concurrency, receiver, herald, healthy).await?
    };
    let mut row = report::row(scenario, opts, healthy, dead, preloaded, prep_secs, rss_prep_mb, raw_per_s, m);
    if let Some(removed_before) = history {
        record_sweep(&mut row, opts, client, herald, removed_before, measured_from).await?;
    }
    if scenario == Scenario::DeadBurst {
        record_dead_burst(&mut row, receiver, preloaded, burst_ns).await;
    }
    if let Some(replay) = replay {
        record_replay(&mut row, &api, replay).await?;
    }
    if scenario == Scenario::Paced {
        row.pace_per_s = Some(opts.pace);
        row.paced_max_per_s = Some(busiest_second(&receiver.tallies.paced.take()));
    }
    Ok(row)
}

/// `--preload-history` messages written into the database, herald started again with a retention
/// the oldest of them have passed when `--preload-expired` asks for it; returns the messages
/// retention had removed by then.
async fn preload_history(
    opts: &Opts,
    client: &reqwest::Client,
    herald: &mut Herald,
    scratch: &Scratch,
    api: &mut Api,
) -> Result<u64> {
    let secs = history::preload(&scratch.database_url, opts.preload_history).await?;
    eprintln!("history: {} messages loaded in {secs:.0} s", opts.preload_history);
    if opts.preload_expired > 0 {
        // Started again with a retention that the oldest part of the history has passed.
        let env = history::expiring(opts.preload_expired);
        herald.terminate().await;
        let bin = opts.herald.as_deref().expect("validated in main");
        *herald = Herald::start(bin, &scratch.database_url, &env, scratch.dir.join("herald-2.log")).await?;
        api.base = herald.base.clone();
    }
    removed_messages(client, herald).await
}

/// The scenario's own preparation before the measured load: the messages it put in place, and
/// the blackhole, which must outlive the run.
async fn prepare(
    scenario: Scenario,
    opts: &Opts,
    api: &Api,
    receiver: &Receiver,
    dead: usize,
) -> Result<(usize, Option<Blackhole>)> {
    Ok(match scenario {
        Scenario::DeadEndpoint => {
            let blackhole = Blackhole::start().await?;
            for i in 0..dead {
                // A short timeout makes the dead endpoint churn: a failure to record every second per slot.
                api.subscribe(&blackhole.url(&format!("/dead/{i}")), MAIN_TYPE, Some(1000)).await?;
            }
            let retries = prepare_retries(api, receiver, &blackhole, opts).await?;
            (retries, Some(blackhole))
        }
        Scenario::DeadBurst => {
            for k in 0..PREP_FANOUT {
                api.subscribe_tried(&receiver.url(&format!("/fail/{k}")), PREP_TYPE, None, 1).await?;
            }
            api.subscribe(&receiver.url("/reports"), "herald.message.dead", None).await?;
            // Published before the measured load starts; they die and are reported while it runs.
            publish_prep(api, PREP_TYPE, opts.dead_burst.div_ceil(PREP_FANOUT)).await?;
            (opts.dead_burst.div_ceil(PREP_FANOUT) * PREP_FANOUT, None)
        }
        Scenario::Paced => {
            for k in 0..PACED_ENDPOINTS {
                api.subscribe_paced(&receiver.url(&format!("/paced/{k}")), PACED_TYPE, opts.pace).await?;
            }
            // A backlog that outlasts the measured load, published just before it.
            publish_prep(api, PACED_TYPE, opts.paced_events).await?;
            (0, None)
        }
        Scenario::Replay => {
            // No subscription takes them when published: the replay finds them kept.
            publish_batches(api, ARCHIVE_TYPE, opts.replay_events, ARCHIVE_BATCH).await?;
            (opts.replay_events, None)
        }
        Scenario::Backlog => {
            for k in 0..PREP_FANOUT {
                api.subscribe(&receiver.url(&format!("/later/{k}")), LATER_TYPE, None).await?;
            }
            let events = opts.backlog.div_ceil(PREP_FANOUT);
            publish_prep(api, LATER_TYPE, events).await?;
            wait_prep(&receiver.tallies.later, events * PREP_FANOUT, "scheduled a day later").await?;
            (events * PREP_FANOUT, None)
        }
        _ => (0, None),
    })
}

/// The bodies of the measured load: the single events, or them grouped `--batch` to a body.
fn measured_bodies(opts: &Opts, singles: &Arc<Vec<Bytes>>) -> Arc<Vec<Bytes>> {
    if opts.batch == 0 {
        singles.clone()
    } else {
        Arc::new(
            (0..opts.events.div_ceil(opts.batch))
                .map(|b| {
                    let to = ((b + 1) * opts.batch).min(opts.events);
                    Bytes::from(publisher::batch("main", MAIN_TYPE, b * opts.batch, to))
                })
                .collect(),
        )
    }
}

/// The preloaded history's sweep: the messages retention removed since `removed_before`, and
/// their rate since the measurement began.
async fn record_sweep(
    row: &mut Row,
    opts: &Opts,
    client: &reqwest::Client,
    herald: &Herald,
    removed_before: u64,
    measured_from: Instant,
) -> Result<()> {
    row.preloaded_history = opts.preload_history;
    let swept = removed_messages(client, herald).await?.saturating_sub(removed_before);
    row.swept_messages = Some(swept);
    row.sweep_per_s = Some(swept as f64 / measured_from.elapsed().as_secs_f64());
    Ok(())
}

/// Waits for the burst's failures and reports, and records when the last of each arrived.
async fn record_dead_burst(row: &mut Row, receiver: &Receiver, preloaded: usize, burst_ns: u64) {
    // Every burst message failed, then reports arrive until all are in or none came for 5 s.
    let failed = &receiver.tallies.fail;
    failed.wait_for(preloaded as u64, Duration::from_secs(120)).await;
    row.dead_burst_failed_secs = failed.take().into_values().max().map(|ns| ns.saturating_sub(burst_ns) as f64 / 1e9);
    let reports = &receiver.tallies.reports;
    let mut seen = reports.distinct();
    while !reports.wait_for(preloaded as u64, Duration::from_secs(5)).await && reports.distinct() > seen {
        seen = reports.distinct();
    }
    row.dead_reported_twice = Some(reports.repeats());
    let seen = reports.take();
    row.dead_reported = Some(seen.len() as u64);
    row.dead_burst_secs = seen.values().max().map(|&ns| ns.saturating_sub(burst_ns) as f64 / 1e9);
}

/// The largest count of one endpoint's arrivals within any second (a window sliding over them),
/// from arrivals keyed by `"{path} {webhook-id}"`.
fn busiest_second(arrivals: &std::collections::HashMap<String, u64>) -> u64 {
    let mut by_path: std::collections::HashMap<&str, Vec<u64>> = std::collections::HashMap::new();
    for (key, &at) in arrivals {
        by_path.entry(key.split(' ').next().unwrap_or("")).or_default().push(at);
    }
    let mut busiest = 0;
    for times in by_path.values_mut() {
        times.sort_unstable();
        let mut from = 0;
        for (to, &at) in times.iter().enumerate() {
            while at - times[from] >= 1_000_000_000 {
                from += 1;
            }
            busiest = busiest.max((to - from + 1) as u64);
        }
    }
    busiest
}

/// The messages herald's retention has removed since it started (`/metrics`).
async fn removed_messages(client: &reqwest::Client, herald: &Herald) -> Result<u64> {
    let text = client.get(format!("{}/metrics", herald.base)).send().await?.text().await?;
    let series = "herald_retention_removed_total{kind=\"messages\"}";
    Ok(text.lines().find_map(|l| l.strip_prefix(series)).and_then(|v| v.trim().parse::<f64>().ok()).unwrap_or(0.0)
        as u64)
}

/// A paused subscription to the archive's type, and a replay of every kept event to it: the job's
/// id and when it started. Its messages are held, so the job's own work is what runs beside the load.
async fn start_replay(api: &Api, receiver: &Receiver) -> Result<(String, Instant)> {
    let sub = api.subscribe_paused(&receiver.url("/archive"), ARCHIVE_TYPE).await?;
    let started = Instant::now();
    Ok((api.replay_window(&sub).await?, started))
}

/// How far the replay got by the end of the load, and how long it took to end.
async fn record_replay(row: &mut Row, api: &Api, (id, started): (String, Instant)) -> Result<()> {
    let job = api.replay_job(&id).await?;
    let replayed = job["replayed"].as_u64().unwrap_or(0);
    row.replayed_during_load = Some(replayed);
    row.replay_per_s_during_load = Some(replayed as f64 / started.elapsed().as_secs_f64());
    let mut last_print = Instant::now();
    while started.elapsed() < REPLAY_END_WAIT {
        let job = api.replay_job(&id).await?;
        if job["state"] != "running" {
            let at = |key: &str| job[key].as_str().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
            row.replay_total_secs = match (at("created_at"), at("finished_at")) {
                (Some(from), Some(to)) => Some((to - from).num_milliseconds() as f64 / 1000.0),
                _ => None,
            };
            return Ok(());
        }
        if last_print.elapsed() >= Duration::from_secs(10) {
            eprintln!("  replay: {} of {} events", job["replayed"], row.preloaded_messages);
            last_print = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

/// `--retries` messages to the blackhole, all in retry: their first attempts fail fast
/// against the receiver's 500 path, then the subscriptions move to the blackhole, taking
/// their waiting messages with them (all to one URL: one dead endpoint).
async fn prepare_retries(api: &Api, receiver: &Receiver, blackhole: &Blackhole, opts: &Opts) -> Result<usize> {
    let mut subs = Vec::new();
    for k in 0..PREP_FANOUT {
        subs.push(api.subscribe(&receiver.url(&format!("/fail/{k}")), PREP_TYPE, Some(1000)).await?);
    }
    let events = opts.retries.div_ceil(PREP_FANOUT);
    publish_prep(api, PREP_TYPE, events).await?;
    wait_prep(&receiver.tallies.fail, events * PREP_FANOUT, "failed once").await?;
    for sub in &subs {
        api.move_subscription(sub, &blackhole.url("/retry")).await?;
    }
    receiver.tallies.fail.take();
    Ok(events * PREP_FANOUT)
}

/// Publishes `count` events of one type in full batches, a few at a time.
async fn publish_prep(api: &Api, event_type: &'static str, count: usize) -> Result<()> {
    publish_batches(api, event_type, count, PREP_BATCH).await
}

/// Publishes `count` events of one type in batches of `per_batch`, a few at a time.
async fn publish_batches(api: &Api, event_type: &'static str, count: usize, per_batch: usize) -> Result<()> {
    let target = Target {
        url: format!("{}/api/v1/events", api.base),
        bearer: Some(api.token.clone()),
        content_type: BATCH,
        id_prefix: None,
    };
    let body = Arc::new(move |b: usize| {
        Bytes::from(publisher::batch(event_type, event_type, b * per_batch, ((b + 1) * per_batch).min(count)))
    });
    let sent = publisher::post_all(&api.client, &target, count.div_ceil(per_batch), 4, body, false).await;
    match publisher::failures(&sent) {
        (0, _) => Ok(()),
        (n, first) => Err(format!("preparation: {n} publishes failed, first: {}", first.unwrap_or_default()).into()),
    }
}

/// Waits until `target` distinct messages reached the tally, printing progress;
/// gives up after a minute without progress.
async fn wait_prep(tally: &Arrivals, target: usize, what: &str) -> Result<()> {
    let (mut last, mut last_change, mut last_print) = (0, Instant::now(), Instant::now());
    loop {
        let seen = tally.distinct() as usize;
        if seen >= target {
            return Ok(());
        }
        if seen != last {
            (last, last_change) = (seen, Instant::now());
        } else if last_change.elapsed() > Duration::from_secs(60) {
            return Err(format!("preparation stalled at {seen}/{target} messages {what}").into());
        }
        if last_print.elapsed() >= Duration::from_secs(5) {
            eprintln!("  preparing: {seen}/{target} messages {what}");
            last_print = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
