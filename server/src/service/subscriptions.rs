//! Subscriptions: a customer's target URL, the event types it wants, and how
//! deliveries to it are retried and signed.

use domain::dto;
use domain::filter::{Filter, Message};
use domain::ids::{CustomerId, SubscriptionId};
use domain::operational::type_matches;
use domain::policy::RetryPolicy;
use domain::request::{
    EventTypes, FilterPreviewBody, FilterTestBody, FilterText, Integer, SubscriptionBody, SubscriptionPatch, Text,
};
use domain::states::{ContentMode, EndpointState, SignatureScheme, SubscriptionStatus};
use domain::target::TargetUrl;
use sea_orm::TransactionTrait;
use serde_json::{Value, json};

use super::Services;
use super::delivery_options::{self as options, ROTATION_OVERLAP_MS};
use super::{Principal, Result, ServiceError, audit, idempotency, views};
use crate::clock::to_utc;
use crate::ids;
use crate::pipeline::Due;
use crate::pipeline::operational::report_dead;
use crate::secrets::Sealer;
use crate::store::entities::{endpoint, subscription};
use crate::store::events::EventFilter;
use crate::store::page::{self, PageRequest};
use crate::store::subscriptions::policy_of;
use crate::store::{customers, endpoints, events, messages, subscriptions};

pub const DEFAULT_TIMEOUT_MS: i64 = 30_000;

/// A private address is refused unless the settings allow it.
fn check_target(services: &Services, url: Option<&TargetUrl>) -> Result<()> {
    if !services.settings.allow_private_targets && url.is_some_and(TargetUrl::is_forbidden_literal) {
        return Err(ServiceError::field("url", "targets a private, loopback or link-local address"));
    }
    Ok(())
}

fn new_endpoint(services: &Services, customer_id: &CustomerId, url: &TargetUrl) -> endpoint::Model {
    let now = services.now_ms();
    endpoint::Model {
        id: ids::new(),
        customer_id: customer_id.clone(),
        url: url.endpoint_key(),
        state: EndpointState::Closed,
        consecutive_failures: 0,
        window_buckets: "[]".into(),
        last_success_at: None,
        last_failure_at: None,
        next_probe_at: None,
        created_at: now,
        updated_at: now,
    }
}

/// A filter is stored only once it compiles and is seen to give a boolean.
fn check_filter(filter: Option<&FilterText>) -> Result<()> {
    match filter.map(|FilterText(text)| Filter::compile(text)) {
        Some(Err(why)) => Err(ServiceError::field("filter", &why)),
        _ => Ok(()),
    }
}

pub async fn create(services: &Services, who: &Principal, body: SubscriptionBody) -> Result<dto::Subscription> {
    who.require_writer()?;
    check_target(services, Some(&body.url))?;
    check_filter(body.filter.as_ref())?;
    options::check_auth(services, body.auth.as_ref())?;
    let customer_id = who.customer_for_write(body.customer_id.as_deref())?;
    customers::get(&services.db, &customer_id).await?.ok_or(ServiceError::NotFound("customer"))?;
    let url = body.url;
    let now = services.now_ms();
    let policy = body.retry_policy.unwrap_or_else(RetryPolicy::default_policy);
    let txn = services.db.begin().await?;
    let endpoint = endpoints::get_or_create(&txn, new_endpoint(services, &customer_id, &url)).await?;
    let mut row = subscription::Model {
        secret: String::new(),
        id: ids::new(),
        customer_id,
        name: body.name.0,
        url: url.as_str().to_string(),
        endpoint_id: endpoint.id,
        event_types: serde_json::to_string(&body.event_types.0).unwrap_or_default(),
        retry_policy: policy.to_json().to_string(),
        timeout_ms: body.timeout_ms.map_or(DEFAULT_TIMEOUT_MS, |Integer(ms)| ms) as i32,
        content_mode: body.content_mode.unwrap_or(ContentMode::Structured),
        status: body.status.unwrap_or(SubscriptionStatus::Active),
        previous_secret: None,
        previous_secret_expires_at: None,
        filter: body.filter.map(|FilterText(text)| text),
        headers: None,
        auth: None,
        signature: SignatureScheme::V1,
        rate_limit_per_sec: body.rate_limit_per_sec.map(|Integer(n)| n as i32),
        created_at: now,
        updated_at: now,
    };
    let secret = options::new_signing_secret(services, &mut row, body.signature.unwrap_or(SignatureScheme::V1), None);
    options::set_headers(services, &mut row, body.headers.as_ref());
    options::set_auth(services, &mut row, body.auth.as_ref());
    subscriptions::insert(&txn, row.clone()).await?;
    let mut detail = json!({"name": row.name, "url": row.url, "event_types": views::json_text(&row.event_types)});
    if let Some(filter) = &row.filter {
        detail["filter"] = json!(filter);
    }
    if let Some(headers) = &body.headers {
        detail["headers"] = options::audit_headers(Some(headers));
    }
    if let Some(auth) = &body.auth {
        detail["auth"] = options::audit_auth(Some(auth));
    }
    detail["signature"] = json!(row.signature);
    audit::record(&txn, services, who, "subscription.create", &row.id, Some(&row.customer_id), detail).await?;
    let opened = views::OpenedSecrets { secret, headers: body.headers.unwrap_or_default(), auth: body.auth };
    let created = views::subscription(row, opened, true);
    idempotency::keep_answer(&txn, Some(&created)).await?;
    txn.commit().await?;
    Ok(created)
}

/// Tries a filter on an event, storing nothing: whether it matches, or why it failed on the event.
pub fn test_filter(body: FilterTestBody) -> Result<dto::FilterTest> {
    let filter = Filter::compile(&body.filter.0).map_err(|why| ServiceError::field("filter", &why))?;
    Ok(match filter.matches(&Message::of(&body.event)) {
        Ok(matches) => dto::FilterTest { matches, error: None },
        Err(error) => dto::FilterTest { matches: false, error: Some(error) },
    })
}

/// Kept events the dashboard's "Test the filter" tries a filter on.
const FILTER_PREVIEW_EVENTS: usize = 20;
/// Events read at a time, and at most, to find them.
const FILTER_PREVIEW_READ: u64 = 200;
const FILTER_PREVIEW_SCAN: usize = 2_000;

/// A filter tried on the customer's latest kept events of the given types, newest first, storing
/// nothing (the dashboard's "Test the filter").
pub async fn preview_filter(
    services: &Services,
    who: &Principal,
    body: FilterPreviewBody,
) -> Result<Vec<dto::FilterMatch>> {
    let filter = Filter::compile(&body.filter.0).map_err(|why| ServiceError::field("filter", &why))?;
    let customer_id = match &body.subscription_id {
        Some(id) => visible(services, who, id).await?.customer_id,
        None => who.customer_for_write(body.customer_id.as_deref())?,
    };
    let EventTypes(types) = body.event_types;
    let archive = EventFilter { customer_id: Some(customer_id), ..EventFilter::default() };
    let (mut found, mut read, mut before) = (Vec::new(), 0, None);
    while found.len() < FILTER_PREVIEW_EVENTS && read < FILTER_PREVIEW_SCAN {
        let page = PageRequest { before, limit: FILTER_PREVIEW_READ };
        // The archive's page of the customer's events, newest first (one row more when more follow).
        let (batch, _) = events::list(&services.db, &archive, &page).await?;
        read += batch.len();
        let last_read = (batch.len() as u64) <= FILTER_PREVIEW_READ;
        before = batch.last().map(|row| row.id.to_string());
        let of_types = batch.iter().filter(|row| types.iter().any(|t| type_matches(t, &row.event_type)));
        for (row, event) in of_types.filter_map(|row| Some((row, row.cloud_event()?))) {
            let outcome = filter.matches(&Message::of(&event));
            found.push(dto::FilterMatch {
                event_id: row.id.to_string(),
                event_type: row.event_type.clone(),
                source: row.source.clone(),
                created_at: to_utc(row.created_at),
                matches: outcome.as_ref().is_ok_and(|m| *m),
                error: outcome.err(),
            });
        }
        if last_read {
            break;
        }
    }
    found.truncate(FILTER_PREVIEW_EVENTS);
    Ok(found)
}

/// A subscription the caller may see, or NotFound.
async fn visible(services: &Services, who: &Principal, id: &SubscriptionId) -> Result<subscription::Model> {
    subscriptions::get(&services.db, id)
        .await?
        .filter(|row| who.sees(&row.customer_id))
        .ok_or(ServiceError::NotFound("subscription"))
}

pub async fn get(services: &Services, who: &Principal, id: &SubscriptionId) -> Result<dto::Subscription> {
    view(services, visible(services, who, id).await?, true)
}

/// The subscription as its owner sees it: with `full`, its `v1` secret and its headers' values.
fn view(services: &Services, row: subscription::Model, full: bool) -> Result<dto::Subscription> {
    let opened = options::open(services, &row)?;
    Ok(views::subscription(row, opened, full))
}

pub async fn list(
    services: &Services,
    who: &Principal,
    customer_id: Option<&str>,
    page: PageRequest,
) -> Result<dto::Page<dto::Subscription>> {
    let rows = subscriptions::list(&services.db, who.customer_filter(customer_id).as_ref(), &page).await?;
    let (rows, next_cursor) = page::finish(rows, page.limit, |r| &r.id);
    let views = rows.into_iter().map(|row| {
        let opened = options::open_listed(services, &row);
        views::subscription(row, opened, false)
    });
    Ok(dto::Page::of(views.collect(), next_cursor))
}

pub async fn update(
    services: &Services,
    who: &Principal,
    id: &SubscriptionId,
    patch: SubscriptionPatch,
) -> Result<dto::Subscription> {
    who.require_writer()?;
    check_target(services, patch.url.as_ref())?;
    check_filter(patch.filter.as_ref().and_then(Option::as_ref))?;
    options::check_auth(services, patch.auth.as_ref().and_then(Option::as_ref))?;
    let detail = changed_fields(&patch);
    let mut row = visible(services, who, id).await?;
    let mut due = Due::nothing();
    let was_paused = row.status == SubscriptionStatus::Paused;
    let txn = services.db.begin().await?;
    if let Some(url) = patch.url
        && url.as_str() != row.url
    {
        let endpoint = endpoints::get_or_create(&txn, new_endpoint(services, &row.customer_id, &url)).await?;
        let locked = endpoint.state == EndpointState::Locked;
        messages::move_to_endpoint(&txn, &row.id, &endpoint.id, locked, services.now_ms()).await?;
        due = Due::anything();
        row.url = url.as_str().to_string();
        row.endpoint_id = endpoint.id;
    }
    if let Some(Text(name)) = patch.name {
        row.name = name;
    }
    if let Some(EventTypes(types)) = patch.event_types {
        row.event_types = serde_json::to_string(&types).unwrap_or_default();
    }
    if let Some(policy) = patch.retry_policy {
        row.retry_policy = policy.to_json().to_string();
    }
    if let Some(Integer(timeout)) = patch.timeout_ms {
        row.timeout_ms = timeout as i32;
    }
    if let Some(mode) = patch.content_mode {
        row.content_mode = mode;
    }
    if let Some(status) = patch.status {
        row.status = status;
    }
    if let Some(filter) = patch.filter {
        row.filter = filter.map(|FilterText(text)| text);
    }
    if let Some(headers) = &patch.headers {
        options::set_headers(services, &mut row, headers.as_ref());
    }
    if let Some(auth) = &patch.auth {
        options::set_auth(services, &mut row, auth.as_ref());
    }
    if let Some(rate) = patch.rate_limit_per_sec {
        row.rate_limit_per_sec = rate.map(|Integer(n)| n as i32);
    }
    if let Some(scheme) = patch.signature.filter(|scheme| *scheme != row.signature) {
        // A change of scheme is a rotation: the receiver has a day to take the new key.
        options::new_signing_secret(services, &mut row, scheme, Some(services.now_ms()));
    }
    row.updated_at = services.now_ms();
    subscriptions::update(&txn, row.clone()).await?;
    let resumed = was_paused && row.status == SubscriptionStatus::Active;
    if resumed {
        // What the pause held is due now, its TTL starting now, at the subscription's current URL.
        let endpoint = endpoints::get(&txn, &row.endpoint_id).await?;
        let locked = endpoint.is_some_and(|e| e.state == EndpointState::Locked);
        let ttl_ms = policy_of(&row).ttl_secs as i64 * 1000;
        messages::release_paused(&txn, &row.id, &row.endpoint_id, locked, ttl_ms, row.updated_at).await?;
        due = due.and_first_attempts_of(row.endpoint_id.clone());
    }
    audit::record(&txn, services, who, "subscription.update", &row.id, Some(&row.customer_id), detail).await?;
    let updated = view(services, row, true)?;
    idempotency::keep_answer(&txn, Some(&updated)).await?;
    services.pipeline.commit_and_wake(txn, due).await?;
    Ok(updated)
}

/// The fields a change names, with their new values (the URL's, not a secret), for its audit row.
fn changed_fields(patch: &SubscriptionPatch) -> Value {
    let mut fields = serde_json::Map::new();
    let mut set = |name: &str, value: Option<Value>| {
        if let Some(value) = value {
            fields.insert(name.to_string(), value);
        }
    };
    set("name", patch.name.as_ref().map(|Text(name)| json!(name)));
    set("url", patch.url.as_ref().map(|url| json!(url.as_str())));
    set("event_types", patch.event_types.as_ref().map(|EventTypes(types)| json!(types)));
    set("retry_policy", patch.retry_policy.as_ref().map(RetryPolicy::to_json));
    set("timeout_ms", patch.timeout_ms.map(|Integer(ms)| json!(ms)));
    set("content_mode", patch.content_mode.map(|mode| json!(mode)));
    set("status", patch.status.map(|status| json!(status)));
    set("filter", patch.filter.as_ref().map(|filter| json!(filter.as_ref().map(|FilterText(text)| text))));
    set("headers", patch.headers.as_ref().map(|headers| options::audit_headers(headers.as_ref())));
    set("auth", patch.auth.as_ref().map(|auth| options::audit_auth(auth.as_ref())));
    set("signature", patch.signature.map(|scheme| json!(scheme)));
    set("rate_limit_per_sec", patch.rate_limit_per_sec.map(|rate| json!(rate.map(|Integer(n)| n))));
    Value::Object(fields)
}

/// Deletes the subscription; its undelivered messages end `dead` with
/// `subscription_deleted`, and their history stays readable.
pub async fn delete(services: &Services, who: &Principal, id: &SubscriptionId) -> Result<()> {
    who.require_writer()?;
    let row = visible(services, who, id).await?;
    let txn = services.db.begin().await?;
    let ended = messages::kill_for_subscription(&txn, &row.id, services.now_ms()).await?;
    subscriptions::delete(&txn, &row.id).await?;
    // Reported once the subscription is gone, so to the customer's other subscriptions only.
    let announced = report_dead(&services.pipeline, &txn, &ended).await?;
    let detail = json!({"name": row.name, "url": row.url, "dead_messages": ended.len()});
    audit::record(&txn, services, who, "subscription.delete", &row.id, Some(&row.customer_id), detail).await?;
    idempotency::keep_answer::<()>(&txn, None).await?;
    services.pipeline.commit_and_wake(txn, announced.into()).await?;
    Ok(())
}

/// A new secret (or key pair, with `v1a`); the previous one keeps signing for 24 hours so
/// receivers can switch.
pub async fn rotate_secret(services: &Services, who: &Principal, id: &SubscriptionId) -> Result<dto::Subscription> {
    who.require_writer()?;
    let mut row = visible(services, who, id).await?;
    let now = services.now_ms();
    let scheme = row.signature;
    options::new_signing_secret(services, &mut row, scheme, Some(now));
    row.updated_at = now;
    let txn = services.db.begin().await?;
    subscriptions::update(&txn, row.clone()).await?;
    let detail =
        json!({"name": row.name, "previous_secret_valid_until": crate::clock::to_utc(now + ROTATION_OVERLAP_MS)});
    audit::record(&txn, services, who, "subscription.rotate_secret", &row.id, Some(&row.customer_id), detail).await?;
    let rotated = view(services, row, true)?;
    idempotency::keep_answer(&txn, Some(&rotated)).await?;
    txn.commit().await?;
    Ok(rotated)
}

/// Seals any secret still stored in plaintext (written before secrets were sealed at rest).
pub async fn seal_plaintext_secrets(services: &Services) -> Result<()> {
    let sealed = |value: &str, id: &str| {
        if Sealer::is_sealed(value) { value.to_string() } else { services.sealer.seal(value, id) }
    };
    for mut row in subscriptions::with_plaintext_secrets(&services.db).await? {
        row.secret = sealed(&row.secret, &row.id);
        row.previous_secret = row.previous_secret.as_deref().map(|previous| sealed(previous, &row.id));
        subscriptions::update(&services.db, row).await?;
    }
    Ok(())
}
