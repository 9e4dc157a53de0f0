//! CloudEvent bodies, and the client that posts them with C concurrent tasks
//! over keep-alive connections: used both to publish to herald and to measure
//! the raw limit of the receiver, so both numbers come from the same code.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Bytes;
use serde::Deserialize;

use crate::now_ns;

pub const SINGLE: &str = "application/cloudevents+json";
pub const BATCH: &str = "application/cloudevents-batch+json";

/// About 200 bytes of `data`, like a small real-world event.
const PAD: &str = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut \
                   labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco.";

/// One CloudEvent as JSON; `run` keeps ids unique across phases.
pub fn event(run: &str, event_type: &str, seq: usize) -> String {
    format!(
        r#"{{"specversion":"1.0","id":"{run}-{seq}","source":"/bench","type":"{event_type}","datacontenttype":"application/json","data":{{"seq":{seq},"text":"{PAD}"}}}}"#
    )
}

/// Events `from..to` as one batch body.
pub fn batch(run: &str, event_type: &str, from: usize, to: usize) -> String {
    let items: Vec<String> = (from..to).map(|i| event(run, event_type, i)).collect();
    format!("[{}]", items.join(","))
}

/// Where and how to post.
#[derive(Clone)]
pub struct Target {
    pub url: String,
    pub bearer: Option<String>,
    pub content_type: &'static str,
    /// Adds `webhook-id: {prefix}{i}`, so the receiver does the same work as for a delivery.
    pub id_prefix: Option<String>,
}

/// One request's outcome.
pub struct Sent {
    pub start_ns: u64,
    pub end_ns: u64,
    /// 0 when the request itself failed.
    pub status: u16,
    pub body: Bytes,
}

pub fn client(concurrency: usize) -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .tcp_nodelay(true)
        .build()
        .expect("a plain HTTP client builds")
}

/// Posts `count` bodies made by `body(i)` with `concurrency` tasks. Responses
/// are kept only when `keep` is set (parsing them later keeps the loop lean).
pub async fn post_all(
    client: &reqwest::Client,
    target: &Target,
    count: usize,
    concurrency: usize,
    body: Arc<dyn Fn(usize) -> Bytes + Send + Sync>,
    keep: bool,
) -> Vec<Sent> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency.min(count) {
        let (client, target, next, body) = (client.clone(), target.clone(), next.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= count {
                    break out;
                }
                out.push(post_one(&client, &target, body(index), index, keep).await);
            }
        }));
    }
    let mut all = Vec::with_capacity(count);
    for task in tasks {
        all.extend(task.await.expect("a publishing task never panics"));
    }
    all
}

/// Posts one body; the response body is kept when `keep` is set or the request failed.
pub async fn post_one(client: &reqwest::Client, target: &Target, payload: Bytes, index: usize, keep: bool) -> Sent {
    let mut req = client.post(&target.url).header("content-type", target.content_type).body(payload);
    if let Some(token) = &target.bearer {
        req = req.bearer_auth(token);
    }
    if let Some(prefix) = &target.id_prefix {
        req = req.header("webhook-id", format!("{prefix}{index}"));
    }
    let start_ns = now_ns();
    let (status, body) = match req.send().await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            let failed = status >= 300;
            // Read the body either way so the connection goes back to the pool.
            let bytes = resp.bytes().await.unwrap_or_default();
            (status, if keep || failed { bytes } else { Bytes::new() })
        }
        Err(e) => (0, Bytes::from(e.to_string())),
    };
    Sent { start_ns, end_ns: now_ns(), status, body }
}

/// Requests that did not succeed, with the first error for the log.
pub fn failures(sent: &[Sent]) -> (usize, Option<String>) {
    let failed: Vec<&Sent> = sent.iter().filter(|s| !(200..300).contains(&s.status)).collect();
    let first = failed.first().map(|s| format!("status {}: {}", s.status, String::from_utf8_lossy(&s.body)));
    (failed.len(), first)
}

#[derive(Deserialize)]
struct PublishAnswer {
    events: Vec<PublishedEvent>,
}

#[derive(Deserialize)]
struct PublishedEvent {
    #[serde(default)]
    duplicate: bool,
    message_ids: Vec<String>,
}

/// `(message id, publish start)` for every message herald created, and how many events it accepted.
pub fn message_ids(sent: &[Sent]) -> (Vec<(String, u64)>, usize) {
    let mut ids = Vec::new();
    let mut accepted = 0;
    for s in sent.iter().filter(|s| (200..300).contains(&s.status)) {
        let Ok(answer) = serde_json::from_slice::<PublishAnswer>(&s.body) else { continue };
        for event in answer.events.into_iter().filter(|e| !e.duplicate) {
            accepted += 1;
            ids.extend(event.message_ids.into_iter().map(|id| (id, s.start_ns)));
        }
    }
    (ids, accepted)
}

/// Requests per second between the first start and the last end.
pub fn rate(sent: &[Sent], items: usize) -> f64 {
    let start = sent.iter().map(|s| s.start_ns).min().unwrap_or(0);
    let end = sent.iter().map(|s| s.end_ns).max().unwrap_or(0);
    if end > start { items as f64 / ((end - start) as f64 / 1e9) } else { 0.0 }
}
