//! The measured phase: publish (under load, or one event at a time), wait
//! for every delivery to healthy endpoints, and join publish times with
//! arrival times.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;

use crate::Result;
use crate::process::Herald;
use crate::publisher::{self, Sent, Target};
use crate::receiver::Receiver;

pub const MAIN_TYPE: &str = "bench.event";

pub struct Measured {
    pub publish_errors: usize,
    pub publish_per_s: f64,
    pub expected: usize,
    /// Publish→receipt latency of each delivered message, in µs, sorted.
    pub latencies_us: Vec<u64>,
    pub deliveries_per_s: f64,
    pub duplicates: u64,
    pub cpu_s: f64,
    pub rss_peak_mb: f64,
}

/// Publishes every body with `concurrency` clients, then waits for every delivery.
pub async fn run(
    client: &reqwest::Client,
    target: &Target,
    bodies: Arc<Vec<Bytes>>,
    concurrency: usize,
    receiver: &Receiver,
    herald: &Herald,
    healthy: usize,
) -> Result<Measured> {
    let before = Before::take(receiver, herald);
    let count = bodies.len();
    let sent =
        publisher::post_all(client, target, count, concurrency, Arc::new(move |i| bodies[i].clone()), true).await;
    finish(sent, receiver, herald, healthy, before).await
}

/// Pause between two events of the idle measurement, so that each publish
/// finds the server idle (the previous attempt recorded, nothing queued).
const IDLE_GAP: Duration = Duration::from_millis(10);

/// Publishes one event at a time to a server with nothing else to do: each
/// after the previous one has arrived and a short pause.
pub async fn idle(
    client: &reqwest::Client,
    target: &Target,
    bodies: &[Bytes],
    receiver: &Receiver,
    herald: &Herald,
) -> Result<Measured> {
    let before = Before::take(receiver, herald);
    let mut sent = Vec::with_capacity(bodies.len());
    let mut accepted = 0;
    for (i, body) in bodies.iter().enumerate() {
        let one = publisher::post_one(client, target, body.clone(), i, true).await;
        if (200..300).contains(&one.status) {
            accepted += 1;
            if !receiver.tallies.ok.wait_for(accepted, Duration::from_secs(10)).await {
                return Err(format!("event {i} was not delivered within 10 s").into());
            }
        }
        sent.push(one);
        tokio::time::sleep(IDLE_GAP).await;
    }
    finish(sent, receiver, herald, 1, before).await
}

/// What the measured phase starts from.
struct Before {
    cpu_s: f64,
}

impl Before {
    fn take(receiver: &Receiver, herald: &Herald) -> Before {
        receiver.tallies.ok.take();
        if !herald.reset_peak_rss() {
            eprintln!("cannot reset herald's peak RSS; it covers the whole run");
        }
        Before { cpu_s: herald.cpu_secs() }
    }
}

/// Waits for the deliveries of what was published and joins each message's
/// publish start with its arrival.
async fn finish(
    sent: Vec<Sent>,
    receiver: &Receiver,
    herald: &Herald,
    healthy: usize,
    before: Before,
) -> Result<Measured> {
    let ok = &receiver.tallies.ok;
    let (publish_errors, first_error) = publisher::failures(&sent);
    if let Some(e) = first_error {
        eprintln!("{publish_errors} publishes failed, first: {e}");
    }
    let (ids, accepted_events) = publisher::message_ids(&sent);
    let publish_per_s = publisher::rate(&sent, accepted_events);
    eprintln!("published {accepted_events} events at {publish_per_s:.0}/s");

    // Every accepted event makes one message per healthy subscription (and one per dead one, never delivered).
    let expected = accepted_events * healthy;
    wait_deliveries(receiver, expected).await;
    let cpu_s = herald.cpu_secs() - before.cpu_s;
    let rss_peak_mb = herald.peak_rss_mb();
    let duplicates = ok.repeats();
    let arrivals = ok.take();

    let first_start = sent.iter().map(|s| s.start_ns).min().unwrap_or(0);
    let mut last_arrival = first_start;
    let mut latencies_us = Vec::with_capacity(expected);
    for (id, start) in &ids {
        if let Some(&at) = arrivals.get(id) {
            latencies_us.push(at.saturating_sub(*start) / 1000);
            last_arrival = last_arrival.max(at);
        }
    }
    latencies_us.sort_unstable();
    let span = (last_arrival - first_start) as f64 / 1e9;
    let deliveries_per_s = if span > 0.0 { latencies_us.len() as f64 / span } else { 0.0 };
    Ok(Measured {
        publish_errors,
        publish_per_s,
        expected,
        latencies_us,
        deliveries_per_s,
        duplicates,
        cpu_s,
        rss_peak_mb,
    })
}

/// Waits for `expected` distinct deliveries, printing progress. Gives up (and
/// reports what arrived) after 30 s without progress or past a deadline scaled
/// to the work: two minutes plus 20 ms per message (a floor of 50 deliveries/s).
async fn wait_deliveries(receiver: &Receiver, expected: usize) {
    let ok = &receiver.tallies.ok;
    let deadline = Instant::now() + Duration::from_secs(120) + Duration::from_millis(20 * expected as u64);
    let (mut last, mut last_change, mut last_print) = (0, Instant::now(), Instant::now());
    loop {
        let seen = ok.distinct() as usize;
        if seen >= expected {
            return;
        }
        if seen != last {
            (last, last_change) = (seen, Instant::now());
        }
        if last_change.elapsed() > Duration::from_secs(30) || Instant::now() > deadline {
            eprintln!("gave up waiting: {seen}/{expected} delivered");
            return;
        }
        if last_print.elapsed() >= Duration::from_secs(5) {
            eprintln!("  delivered {seen}/{expected}");
            last_print = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
