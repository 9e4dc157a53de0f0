//! The `history` scenario: a database holding `--history` messages, each with its event and one
//! attempt, loaded through the store's bulk insert (not the API) and spread over the last 30
//! days; nine in ten belong to one customer, the rest to `--history-customers` others. Then every
//! dashboard page and every list and search route of the API is timed, as that customer and as
//! the admin: each request `--history-loads` times, the median and the slowest reported.

use std::time::{Duration, Instant};

use domain::ids::{CustomerId, EndpointId, EventId, MessageId, PrefixedId};
use domain::states::{MessageState, Outcome};
use herald::config::SqliteSynchronous;
use herald::ids::new_id;
use herald::store::entities::{attempt, endpoint, event, message, subscription};
use herald::store::{self, page::encode_cursor};
use reqwest::redirect::Policy;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    TransactionTrait,
};
use serde::Serialize;
use serde_json::json;

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
    load(&db, &customers, &main_id, opts.history).await?;
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
    let timings = time_everything(opts, herald, &client, &db, main_customer, &main.token).await?;
    Ok((opts.history, scratch.database_url.split(':').next().unwrap_or("").to_string(), timings))
}

/// `--preload-history`: the history written into a running herald's database for its one
/// customer with subscriptions, then (PostgreSQL) vacuumed and analyzed. Returns the seconds taken.
pub async fn preload(database_url: &str, count: usize) -> Result<f64> {
    let started = Instant::now();
    let db = store::connect(database_url, SqliteSynchronous::Normal).await?;
    let customers = customers(&db).await?;
    let main = customers.first().map(|c| c.id.clone()).ok_or("no customer has a subscription")?;
    load(&db, &customers, &main, count).await?;
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

/// Writes `count` messages with their events and attempts: nine in ten for `main`, the rest
/// spread over the others, times spread evenly over the last 30 days, ids in time order.
async fn load(db: &DatabaseConnection, customers: &[Loaded], main: &CustomerId, count: usize) -> Result<()> {
    let now = chrono::Utc::now().timestamp_millis();
    let first = now - DAYS * DAY_MS;
    let step = (DAYS * DAY_MS) as f64 / count.max(1) as f64;
    let main_index = customers.iter().position(|c| c.id == *main).expect("main is among them");
    let others: Vec<usize> = (0..customers.len()).filter(|&i| i != main_index).collect();
    let mut done = 0;
    while done < count {
        let n = LOAD_BATCH.min(count - done);
        let (mut events, mut messages, mut attempts) =
            (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        for i in done..done + n {
            let at = first + (i as f64 * step) as i64;
            let customer = if i % 10 == 0 && !others.is_empty() {
                &customers[others[(i / 10) % others.len()]]
            } else {
                &customers[main_index]
            };
            let (sub, endpoint_id) = &customer.routes[i % customer.routes.len()];
            let dead = i % DEAD_EVERY == 0;
            let event_id: EventId = id_at(at);
            let message_id: MessageId = id_at(at);
            let types: Vec<String> = serde_json::from_str(&sub.event_types).unwrap_or_default();
            let event_type = types.into_iter().next().unwrap_or_else(|| EVENT_TYPES[0].to_string());
            let payload = json!({"specversion": "1.0", "id": format!("h-{i}"), "source": "/history",
                "type": event_type, "data": {"order": i, "amount": "99.90"}})
            .to_string();
            events.push(event::Model {
                id: event_id.clone(),
                customer_id: customer.id.clone(),
                source: "/history".into(),
                ce_id: format!("h-{i}"),
                event_type: event_type.clone(),
                payload,
                created_at: at,
                message_ids: message_id.to_string(),
            });
            let status = if dead { 400 } else { 200 };
            messages.push(message::Model {
                id: message_id.clone(),
                customer_id: customer.id.clone(),
                event_id,
                subscription_id: sub.id.clone(),
                endpoint_id: endpoint_id.clone(),
                event_type,
                state: if dead { MessageState::Dead } else { MessageState::Delivered },
                dead_reason: dead.then(|| "non_retryable".into()),
                attempt_count: 1,
                attempt_base: 0,
                ttl_started_at: at,
                expires_at: at + DAY_MS,
                next_attempt_at: None,
                lease_token: None,
                created_at: at,
                updated_at: at + 20,
                delivered_at: (!dead).then_some(at + 20),
                last_status: Some(status),
                first_failed_at: dead.then_some(at),
            });
            attempts.push(attempt::Model {
                message_id,
                customer_id: customer.id.clone(),
                number: 1,
                started_at: at + 5,
                duration_ms: 15,
                status_code: Some(status),
                error_kind: None,
                error_detail: None,
                outcome: if dead { Outcome::Permanent } else { Outcome::Success },
                request_headers: "{}".into(),
                response_headers: "{}".into(),
                response_body: Some(if dead { "bad request" } else { "ok" }.into()),
                trace_id: None,
            });
        }
        // Counted as the engine counts them: every message, and the attempts of the last day.
        let since = (now / 60_000 - store::counts::ATTEMPT_MINUTES_KEPT) * 60_000;
        let recent = attempts.iter().filter(|a| a.started_at >= since).map(|a| store::counts::Attempted {
            customer_id: &a.customer_id,
            started_at: a.started_at,
            succeeded: a.outcome == Outcome::Success,
        });
        let txn = db.begin().await?;
        store::bulk::insert(&txn, &events).await?;
        store::messages::insert_many(&txn, &messages).await?;
        store::bulk::insert(&txn, &attempts).await?;
        store::counts::add_attempts(&txn, 0, recent).await?;
        txn.commit().await?;
        done += n;
        if done % 100_000 < LOAD_BATCH {
            eprintln!("  {done} of {count}");
        }
    }
    Ok(())
}

/// A prefixed ULID made at `ms`, so the loaded ids sort by their time as published ones do.
fn id_at<Id: PrefixedId>(ms: i64) -> Id {
    let prefix = Id::PREFIX;
    let fresh = new_id(prefix);
    let random = ulid::Ulid::from_string(&fresh[prefix.len() + 1..]).map(|u| u.random()).unwrap_or_default();
    Id::from(format!("{prefix}_{}", ulid::Ulid::from_parts(ms as u64, random)))
}

/// A logged-in dashboard session's cookie.
async fn login(client: &reqwest::Client, base: &str, username: &str) -> Result<String> {
    let page = client.get(format!("{base}/login")).send().await?.text().await?;
    let action = page
        .split("action=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .find(|a| a.contains("login"))
        .ok_or("no login form")?
        .to_string();
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs([("username", username), ("password", PASSWORD)])
        .finish();
    let resp = client
        .post(format!("{base}{action}"))
        .header("origin", base)
        .header("referer", format!("{base}/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await?;
    let cookie = resp.headers().get("set-cookie").and_then(|v| v.to_str().ok()).ok_or("login set no cookie")?;
    Ok(cookie.split(';').next().unwrap_or_default().to_string())
}

/// A group of pages timed together: its name, the pages, and who reads them.
type PageGroup<'a> = (&'static str, &'a [(&'a str, String)], As<'a>);

/// How one request is authenticated.
enum As<'a> {
    Token(&'a str),
    Cookie(&'a str),
}

async fn time(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    auth: &As<'_>,
    loads: usize,
) -> Result<(u16, f64, f64)> {
    let mut took = Vec::with_capacity(loads);
    let mut status = 0;
    for _ in 0..loads {
        let mut req = client.get(format!("{base}{path}")).header("accept", "text/html, application/json");
        req = match auth {
            As::Token(token) => req.bearer_auth(token),
            As::Cookie(cookie) => req.header("cookie", *cookie),
        };
        let started = Instant::now();
        let resp = req.send().await?;
        status = resp.status().as_u16();
        resp.bytes().await?;
        took.push(started.elapsed());
    }
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Ok((status, ms(took[took.len() / 2]), ms(*took.last().expect("at least one load"))))
}

async fn time_everything(
    opts: &Opts,
    herald: &Herald,
    client: &reqwest::Client,
    db: &DatabaseConnection,
    main: &Loaded,
    key: &str,
) -> Result<Vec<Timing>> {
    let base = &herald.base;
    let user = json!({"username": "history", "password": PASSWORD, "role": "customer", "customer_id": main.id});
    let resp = client.post(format!("{base}/api/v1/users")).bearer_auth(&herald.admin_token).json(&user).send().await?;
    if !resp.status().is_success() {
        return Err(format!("create user: {}", resp.text().await?).into());
    }
    let customer_cookie = login(client, base, "history").await?;
    let admin_cookie = login(client, base, "admin").await?;

    // A message, an event and a cursor from the middle of the main customer's history.
    let middle: Vec<message::Model> = message::Entity::find()
        .filter(message::Column::CustomerId.eq(main.id.as_str()))
        .filter(message::Column::CreatedAt.gte(chrono::Utc::now().timestamp_millis() - DAYS * DAY_MS / 2))
        .order_by_asc(message::Column::Id)
        .limit(1)
        .all(db)
        .await?;
    let middle = middle.first().ok_or("no message in the middle of the history")?;
    let deep = encode_cursor(&middle.id);
    let (sub, endpoint) = &main.routes[0];
    let ce_id = event::Entity::find_by_id(middle.event_id.as_str()).one(db).await?.map(|e| e.ce_id).unwrap_or_default();
    let day_ago = (chrono::Utc::now() - chrono::Duration::days(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let week_ago = (chrono::Utc::now() - chrono::Duration::days(8)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let week_ago_end =
        (chrono::Utc::now() - chrono::Duration::days(7)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let c = &main.id;
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let customer_pages = vec![
        ("overview", "/".to_string()),
        ("delivery log", "/messages".into()),
        ("delivery log, a deep page", format!("/messages?cursor={deep}")),
        ("delivery log by state (dead)", "/messages?state=dead".into()),
        ("delivery log by event type", "/messages?event_type=order.paid".into()),
        ("delivery log by a type none has", format!("/messages?event_type={NO_SUCH_TYPE}")),
        ("delivery log by subscription", format!("/messages?subscription_id={}", sub.id)),
        ("delivery log by event id", format!("/messages?event_id={}", enc(&ce_id))),
        ("delivery log, a day a week ago", format!("/messages?since={}&until={}", enc(&week_ago), enc(&week_ago_end))),
        ("a message", format!("/messages/{}", middle.id)),
        ("dead letters", "/dead-letters".into()),
        ("events", "/events".into()),
        ("events by type", "/events?type=order.paid".into()),
        ("events by a type none has", format!("/events?type={NO_SUCH_TYPE}")),
        ("events by id", format!("/events?event_id={}", enc(&ce_id))),
        ("endpoints", "/endpoints".into()),
        ("an endpoint", format!("/endpoints/{endpoint}")),
        ("subscriptions", "/subscriptions".into()),
        ("a subscription", format!("/subscriptions/{}", sub.id)),
    ];
    let admin_pages = vec![
        ("overview", "/".to_string()),
        ("delivery log", "/messages".into()),
        ("delivery log by customer", format!("/messages?customer_id={c}")),
        ("delivery log by state (dead)", "/messages?state=dead".into()),
        ("delivery log by event type", "/messages?event_type=order.paid".into()),
        ("delivery log by a type none has", format!("/messages?event_type={NO_SUCH_TYPE}")),
        ("delivery log, the last day", format!("/messages?since={}", enc(&day_ago))),
        ("dead letters", "/dead-letters".into()),
        ("events", "/events".into()),
        ("endpoints", "/endpoints".into()),
        ("customers", "/admin/customers".into()),
        ("audit", "/admin/audit".into()),
    ];
    let customer_api = vec![
        ("messages", "/api/v1/messages".to_string()),
        ("messages, a deep page", format!("/api/v1/messages?cursor={deep}")),
        ("messages by state (dead)", "/api/v1/messages?state=dead".into()),
        ("messages by event type", "/api/v1/messages?event_type=order.paid".into()),
        ("messages by a type none has", format!("/api/v1/messages?event_type={NO_SUCH_TYPE}")),
        ("messages by subscription", format!("/api/v1/messages?subscription_id={}", sub.id)),
        ("messages by event id", format!("/api/v1/messages?event_id={}", enc(&ce_id))),
        (
            "messages, a day a week ago",
            format!("/api/v1/messages?since={}&until={}", enc(&week_ago), enc(&week_ago_end)),
        ),
        ("messages, 1000 a page", "/api/v1/messages?limit=1000".into()),
        ("a message", format!("/api/v1/messages/{}", middle.id)),
        ("events", "/api/v1/events".into()),
        ("events, a deep page", format!("/api/v1/events?cursor={}", encode_cursor(&middle.event_id))),
        ("events by type", "/api/v1/events?type=order.paid".into()),
        ("events by a type none has", format!("/api/v1/events?type={NO_SUCH_TYPE}")),
        ("an event by id", format!("/api/v1/events/{}", enc(&ce_id))),
        ("endpoints", "/api/v1/endpoints".into()),
        ("subscriptions", "/api/v1/subscriptions".into()),
    ];
    let admin_api = vec![
        ("messages of every customer", "/api/v1/messages".to_string()),
        ("messages by customer", format!("/api/v1/messages?customer_id={c}")),
        ("messages by state (dead)", "/api/v1/messages?state=dead".into()),
        ("messages by event type", "/api/v1/messages?event_type=order.paid".into()),
        ("messages by a type none has", format!("/api/v1/messages?event_type={NO_SUCH_TYPE}")),
        ("messages, the last day", format!("/api/v1/messages?since={}", enc(&day_ago))),
        ("events by customer", format!("/api/v1/events?customer_id={c}")),
        ("events by type", "/api/v1/events?type=order.paid".into()),
        ("events by a type none has", format!("/api/v1/events?type={NO_SUCH_TYPE}")),
        ("endpoints", "/api/v1/endpoints".into()),
        ("audit log", "/api/v1/audit-log".into()),
    ];
    let mut timings = Vec::new();
    let groups: [PageGroup<'_>; 4] = [
        ("customer, dashboard", &customer_pages, As::Cookie(&customer_cookie)),
        ("admin, dashboard", &admin_pages, As::Cookie(&admin_cookie)),
        ("customer, API", &customer_api, As::Token(key)),
        ("admin, API", &admin_api, As::Token(&herald.admin_token)),
    ];
    for (who, requests, auth) in &groups {
        for (what, path) in requests.iter() {
            let (status, median_ms, max_ms) = time(client, base, path, auth, opts.history_loads).await?;
            eprintln!("  {who:<20} {what:<34} {status} {median_ms:>9.1} ms (max {max_ms:.1})");
            timings.push(Timing { who, what: what.to_string(), path: path.clone(), status, median_ms, max_ms });
        }
    }
    Ok(timings)
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
