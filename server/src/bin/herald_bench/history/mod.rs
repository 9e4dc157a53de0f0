//! The `history` scenario: a database holding `--history` messages, each with its event and one
//! attempt, loaded through the store's bulk insert (not the API) and spread over the last 30
//! days; nine in ten belong to one customer, the rest to `--history-customers` others. Then every
//! dashboard page and every list and search route of the API is timed, as that customer and as
//! the admin: each request `--history-loads` times, the median and the slowest reported.

mod load;
mod pages;

use std::time::Instant;

use domain::ids::{CustomerId, EndpointId};
use herald::config::SqliteSynchronous;
use herald::store;
use herald::store::entities::{endpoint, subscription};
use reqwest::redirect::Policy;
use sea_orm::{ConnectionTrait, DatabaseConnection, EntityTrait};
use serde::Serialize;

use crate::Result;
use crate::api::Api;
use crate::scenarios::start_herald;
use crate::{Opts, db::Scratch, process::Herald};

const DAY_MS: i64 = 86_400_000;
const DAYS: i64 = 30;
/// Messages written per transaction while loading.
const LOAD_BATCH: usize = 5_000;
/// One message in this many dies (the others are delivered).
const DEAD_EVERY: usize = 25;
const EVENT_TYPES: [&str; 4] = ["order.created", "order.paid", "order.shipped", "invoice.sent"];
const PASSWORD: &str = "history-password";
/// A filter no row matches: the most a filter without an index of its own may read.
const NO_SUCH_TYPE: &str = "order.refunded";

/// One timed request.
#[derive(Debug, Serialize)]
pub struct Timing {
    pub who: &'static str,
    pub what: String,
    pub path: String,
    pub status: u16,
    pub median_ms: f64,
    pub max_ms: f64,
}

/// A customer as loaded: its subscriptions with their endpoints.
struct Loaded {
    id: CustomerId,
    routes: Vec<(subscription::Model, EndpointId)>,
}

pub async fn run(opts: &Opts) -> Result<(usize, String, Vec<Timing>)> {
    // Retention would start removing the loaded history at once; the breaker and the lanes have
    // nothing to do (no message is open).
    let keep = (10 * 365 * 86_400).to_string();
    let env = [
        ("HERALD_RETENTION_EVENTS_SECS", keep.clone()),
        ("HERALD_RETENTION_MESSAGES_SECS", keep),
        ("HERALD_ADMIN_PASSWORD", PASSWORD.to_string()),
    ];
    let (herald, scratch) = start_herald(opts, &env).await?;
    let result = measure(opts, &herald, &scratch).await;
    herald.stop().await;
    scratch.remove(result.is_err()).await;
    result
}

async fn measure(opts: &Opts, herald: &Herald, scratch: &Scratch) -> Result<(usize, String, Vec<Timing>)> {
    let client = reqwest::Client::builder().redirect(Policy::none()).build()?;
    let main = Api::new_customer(client.clone(), &herald.base, &herald.admin_token).await?;
    let mut others = Vec::new();
    for _ in 0..opts.history_customers {
        others.push(Api::new_customer(client.clone(), &herald.base, &herald.admin_token).await?);
    }
    // Nothing listens on port 9: no loaded message is open, so nothing is sent there.
    for api in std::iter::once(&main).chain(&others) {
        for (n, event_type) in EVENT_TYPES.iter().enumerate() {
            api.subscribe(&format!("http://127.0.0.1:9/hook/{n}"), event_type, None).await?;
        }
    }
    let db = store::connect(&scratch.database_url, SqliteSynchronous::Normal).await?;
    let customers = customers(&db).await?;
    // Ids sort by creation: the main customer was made first.
    let main_id = customers.first().map(|c| c.id.clone()).ok_or("no customer was created")?;
    let started = Instant::now();
    load::load(&db, &customers, &main_id, opts.history).await?;
    if store::is_postgres(&db) {
        // What autovacuum does after such a load, within a minute or so: the planner's
        // statistics, and the visibility map that lets index-only scans skip the table.
        db.execute_unprepared("VACUUM ANALYZE").await?;
    }
    let load_secs = started.elapsed().as_secs_f64();
    eprintln!(
        "loaded {} messages with their events and attempts in {load_secs:.0} s ({:.0}/s)",
        opts.history,
        opts.history as f64 / load_secs
    );
    let main_customer = customers.iter().find(|c| c.id == main_id).expect("loaded");
    let timings = pages::time_everything(opts, herald, &client, &db, main_customer, &main.token).await?;
    Ok((opts.history, scratch.database_url.split(':').next().unwrap_or("").to_string(), timings))
}

/// `--preload-history`: the history written into a running herald's database for its one
/// customer with subscriptions, then (PostgreSQL) vacuumed and analyzed. Returns the seconds taken.
pub async fn preload(database_url: &str, count: usize) -> Result<f64> {
    let started = Instant::now();
    let db = store::connect(database_url, SqliteSynchronous::Normal).await?;
    let customers = customers(&db).await?;
    let main = customers.first().map(|c| c.id.clone()).ok_or("no customer has a subscription")?;
    load::load(&db, &customers, &main, count).await?;
    if store::is_postgres(&db) {
        db.execute_unprepared("VACUUM ANALYZE").await?;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// The retention settings under which `percent` of a history loaded now is past its time,
/// swept every second.
pub fn expiring(percent: u8) -> Vec<(&'static str, String)> {
    let keep_secs = (DAYS * DAY_MS / 1000) * (100 - i64::from(percent)) / 100;
    vec![
        ("HERALD_RETENTION_MESSAGES_SECS", keep_secs.max(1).to_string()),
        ("HERALD_RETENTION_EVENTS_SECS", keep_secs.max(1).to_string()),
        ("HERALD_RETENTION_SWEEP_SECS", "1".to_string()),
    ]
}

/// Every customer with its subscriptions and their endpoints; the first created is the main one.
async fn customers(db: &DatabaseConnection) -> Result<Vec<Loaded>> {
    let subs = subscription::Entity::find().all(db).await?;
    let endpoints = endpoint::Entity::find().all(db).await?;
    let mut customers: Vec<Loaded> = Vec::new();
    let mut ids: Vec<CustomerId> = subs.iter().map(|s| s.customer_id.clone()).collect();
    ids.sort();
    ids.dedup();
    for id in ids {
        let routes = subs
            .iter()
            .filter(|s| s.customer_id == id)
            .map(|s| {
                let endpoint = endpoints.iter().find(|e| e.customer_id == id && e.url == s.url).map(|e| e.id.clone());
                (s.clone(), endpoint.unwrap_or_default())
            })
            .collect();
        customers.push(Loaded { id, routes });
    }
    Ok(customers)
}

/// The table for docs/performance.md.
pub fn print(messages: usize, database: &str, timings: &[Timing]) {
    println!("\n{messages} messages on {database}: median and slowest of each request\n");
    println!("| who | request | status | median ms | slowest ms |");
    println!("|---|---|---|---|---|");
    for t in timings {
        println!("| {} | {} | {} | {:.1} | {:.1} |", t.who, t.what, t.status, t.median_ms, t.max_ms);
    }
}
