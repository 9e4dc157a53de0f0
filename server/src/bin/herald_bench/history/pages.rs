//! Every dashboard page and every list and search route of the API, timed as a customer and as
//! the admin.

use std::time::{Duration, Instant};

use domain::ids::{CustomerId, EndpointId};
use herald::store::entities::{event, message, subscription};
use herald::store::page::encode_cursor;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde_json::json;

use super::{DAY_MS, DAYS, Loaded, NO_SUCH_TYPE, PASSWORD, Timing};
use crate::Result;
use crate::{Opts, process::Herald};

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

/// Every dashboard page and every list and search route of the API, timed as the main customer
/// and as the admin, in that order.
pub(super) async fn time_everything(
    opts: &Opts,
    herald: &Herald,
    client: &reqwest::Client,
    db: &DatabaseConnection,
    main: &Loaded,
    key: &str,
) -> Result<Vec<Timing>> {
    let (customer_cookie, admin_cookie) = log_in_both(client, herald, main).await?;
    let sample = Sample::find(db, main).await?;
    let customer_pages = sample.customer_pages();
    let admin_pages = sample.admin_pages();
    let customer_api = sample.customer_api();
    let admin_api = sample.admin_api();
    let groups: [PageGroup<'_>; 4] = [
        ("customer, dashboard", &customer_pages, As::Cookie(&customer_cookie)),
        ("admin, dashboard", &admin_pages, As::Cookie(&admin_cookie)),
        ("customer, API", &customer_api, As::Token(key)),
        ("admin, API", &admin_api, As::Token(&herald.admin_token)),
    ];
    time_groups(opts, client, &herald.base, &groups).await
}

/// Creates a dashboard user for the main customer, then logs it and the admin in: their cookies.
async fn log_in_both(client: &reqwest::Client, herald: &Herald, main: &Loaded) -> Result<(String, String)> {
    let base = &herald.base;
    let user = json!({"username": "history", "password": PASSWORD, "role": "customer", "customer_id": main.id});
    let resp = client.post(format!("{base}/api/v1/users")).bearer_auth(&herald.admin_token).json(&user).send().await?;
    if !resp.status().is_success() {
        return Err(format!("create user: {}", resp.text().await?).into());
    }
    let customer_cookie = login(client, base, "history").await?;
    let admin_cookie = login(client, base, "admin").await?;
    Ok((customer_cookie, admin_cookie))
}

/// What the timed requests name: a message, its event and a cursor from the middle of the main
/// customer's history, one of its subscriptions with its endpoint, and the filters' dates.
struct Sample<'a> {
    customer: &'a CustomerId,
    middle: message::Model,
    deep: String,
    ce_id: String,
    sub: &'a subscription::Model,
    endpoint: &'a EndpointId,
    day_ago: String,
    week_ago: String,
    week_ago_end: String,
}

impl<'a> Sample<'a> {
    /// Reads the middle of `main`'s history from the database.
    async fn find(db: &DatabaseConnection, main: &'a Loaded) -> Result<Self> {
        let middle: Vec<message::Model> = message::Entity::find()
            .filter(message::Column::CustomerId.eq(main.id.as_str()))
            .filter(message::Column::CreatedAt.gte(chrono::Utc::now().timestamp_millis() - DAYS * DAY_MS / 2))
            .order_by_asc(message::Column::Id)
            .limit(1)
            .all(db)
            .await?;
        let middle = middle.into_iter().next().ok_or("no message in the middle of the history")?;
        let deep = encode_cursor(&middle.id);
        let (sub, endpoint) = &main.routes[0];
        let ce_id =
            event::Entity::find_by_id(middle.event_id.as_str()).one(db).await?.map(|e| e.ce_id).unwrap_or_default();
        let days_ago = |days| {
            (chrono::Utc::now() - chrono::Duration::days(days)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        };
        let day_ago = days_ago(1);
        let week_ago = days_ago(8);
        let week_ago_end = days_ago(7);
        Ok(Sample { customer: &main.id, middle, deep, ce_id, sub, endpoint, day_ago, week_ago, week_ago_end })
    }

    /// The dashboard pages the customer reads.
    fn customer_pages(&self) -> Vec<(&'static str, String)> {
        let Sample { middle, deep, ce_id, sub, endpoint, week_ago, week_ago_end, .. } = self;
        vec![
            ("overview", "/".to_string()),
            ("delivery log", "/messages".into()),
            ("delivery log, a deep page", format!("/messages?cursor={deep}")),
            ("delivery log by state (dead)", "/messages?state=dead".into()),
            ("delivery log by event type", "/messages?event_type=order.paid".into()),
            ("delivery log by a type none has", format!("/messages?event_type={NO_SUCH_TYPE}")),
            ("delivery log by subscription", format!("/messages?subscription_id={}", sub.id)),
            ("delivery log by event id", format!("/messages?event_id={}", enc(ce_id))),
            (
                "delivery log, a day a week ago",
                format!("/messages?since={}&until={}", enc(week_ago), enc(week_ago_end)),
            ),
            ("a message", format!("/messages/{}", middle.id)),
            ("dead letters", "/dead-letters".into()),
            ("events", "/events".into()),
            ("events by type", "/events?type=order.paid".into()),
            ("events by a type none has", format!("/events?type={NO_SUCH_TYPE}")),
            ("events by id", format!("/events?event_id={}", enc(ce_id))),
            ("endpoints", "/endpoints".into()),
            ("an endpoint", format!("/endpoints/{endpoint}")),
            ("subscriptions", "/subscriptions".into()),
            ("a subscription", format!("/subscriptions/{}", sub.id)),
        ]
    }

    /// The dashboard pages the admin reads.
    fn admin_pages(&self) -> Vec<(&'static str, String)> {
        let Sample { customer: c, day_ago, .. } = self;
        vec![
            ("overview", "/".to_string()),
            ("delivery log", "/messages".into()),
            ("delivery log by customer", format!("/messages?customer_id={c}")),
            ("delivery log by state (dead)", "/messages?state=dead".into()),
            ("delivery log by event type", "/messages?event_type=order.paid".into()),
            ("delivery log by a type none has", format!("/messages?event_type={NO_SUCH_TYPE}")),
            ("delivery log, the last day", format!("/messages?since={}", enc(day_ago))),
            ("dead letters", "/dead-letters".into()),
            ("events", "/events".into()),
            ("endpoints", "/endpoints".into()),
            ("customers", "/admin/customers".into()),
            ("audit", "/admin/audit".into()),
        ]
    }

    /// The API routes the customer's key reads.
    fn customer_api(&self) -> Vec<(&'static str, String)> {
        let Sample { middle, deep, ce_id, sub, week_ago, week_ago_end, .. } = self;
        vec![
            ("messages", "/api/v1/messages".to_string()),
            ("messages, a deep page", format!("/api/v1/messages?cursor={deep}")),
            ("messages by state (dead)", "/api/v1/messages?state=dead".into()),
            ("messages by event type", "/api/v1/messages?event_type=order.paid".into()),
            ("messages by a type none has", format!("/api/v1/messages?event_type={NO_SUCH_TYPE}")),
            ("messages by subscription", format!("/api/v1/messages?subscription_id={}", sub.id)),
            ("messages by event id", format!("/api/v1/messages?event_id={}", enc(ce_id))),
            (
                "messages, a day a week ago",
                format!("/api/v1/messages?since={}&until={}", enc(week_ago), enc(week_ago_end)),
            ),
            ("messages, 1000 a page", "/api/v1/messages?limit=1000".into()),
            ("a message", format!("/api/v1/messages/{}", middle.id)),
            ("events", "/api/v1/events".into()),
            ("events, a deep page", format!("/api/v1/events?cursor={}", encode_cursor(&middle.event_id))),
            ("events by type", "/api/v1/events?type=order.paid".into()),
            ("events by a type none has", format!("/api/v1/events?type={NO_SUCH_TYPE}")),
            ("an event by id", format!("/api/v1/events/{}", enc(ce_id))),
            ("endpoints", "/api/v1/endpoints".into()),
            ("subscriptions", "/api/v1/subscriptions".into()),
        ]
    }

    /// The API routes the admin token reads.
    fn admin_api(&self) -> Vec<(&'static str, String)> {
        let Sample { customer: c, day_ago, .. } = self;
        vec![
            ("messages of every customer", "/api/v1/messages".to_string()),
            ("messages by customer", format!("/api/v1/messages?customer_id={c}")),
            ("messages by state (dead)", "/api/v1/messages?state=dead".into()),
            ("messages by event type", "/api/v1/messages?event_type=order.paid".into()),
            ("messages by a type none has", format!("/api/v1/messages?event_type={NO_SUCH_TYPE}")),
            ("messages, the last day", format!("/api/v1/messages?since={}", enc(day_ago))),
            ("events by customer", format!("/api/v1/events?customer_id={c}")),
            ("events by type", "/api/v1/events?type=order.paid".into()),
            ("events by a type none has", format!("/api/v1/events?type={NO_SUCH_TYPE}")),
            ("endpoints", "/api/v1/endpoints".into()),
            ("audit log", "/api/v1/audit-log".into()),
        ]
    }
}

/// `s` encoded for a query string.
fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
}

/// Times every request of every group in turn, printing each result as it comes.
async fn time_groups(
    opts: &Opts,
    client: &reqwest::Client,
    base: &str,
    groups: &[PageGroup<'_>],
) -> Result<Vec<Timing>> {
    let mut timings = Vec::new();
    for (who, requests, auth) in groups {
        for (what, path) in requests.iter() {
            let (status, median_ms, max_ms) = time(client, base, path, auth, opts.history_loads).await?;
            eprintln!("  {who:<20} {what:<34} {status} {median_ms:>9.1} ms (max {max_ms:.1})");
            timings.push(Timing { who, what: what.to_string(), path: path.clone(), status, median_ms, max_ms });
        }
    }
    Ok(timings)
}
