//! Stored rows to the JSON shapes of `domain::dto`.

use domain::breaker::Window;
use domain::dto;
use domain::request::{DeliveryAuth, ExtraHeaders};
use domain::signing::public_key;
use domain::states::SignatureScheme;
use serde_json::Value;

use crate::clock::to_utc;
use crate::store::entities::{api_key, attempt, audit, customer, endpoint, event_type, message, subscription};
use crate::store::messages::PAUSED;

/// Stored JSON text as a value (null if it does not parse).
pub(super) fn json_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// When the row of this id was made, as its id says (ids begin with their time).
pub fn time_of_id(id: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    crate::ids::made_at(id).map(to_utc)
}

pub fn customer(row: customer::Model) -> dto::Customer {
    dto::Customer { id: row.id.into(), name: row.name, created_at: to_utc(row.created_at) }
}

/// A subscription's secrets as opened for its view.
pub struct OpenedSecrets {
    /// The current signing secret, opened.
    pub secret: String,
    pub headers: ExtraHeaders,
    pub auth: Option<DeliveryAuth>,
}

/// A subscription. `full` for its owner's single reads: the `v1` secret and the headers' values
/// are shown only then; never the credentials' secrets or a `v1a` secret key.
pub fn subscription(row: subscription::Model, opened: OpenedSecrets, full: bool) -> dto::Subscription {
    let auth = opened.auth.map(|auth| {
        let public = auth.public_json();
        let text = |key: &str| public[key].as_str().map(str::to_string);
        dto::AuthView {
            kind: auth.kind().to_string(),
            username: text("username"),
            token_url: text("token_url"),
            client_id: text("client_id"),
            scope: text("scope"),
        }
    });
    let headers = opened.headers.0;
    dto::Subscription {
        id: row.id.into(),
        customer_id: row.customer_id.into(),
        name: row.name,
        url: row.url,
        event_types: serde_json::from_str(&row.event_types).unwrap_or_default(),
        retry_policy: json_text(&row.retry_policy),
        timeout_ms: row.timeout_ms as u32,
        content_mode: row.content_mode,
        status: row.status,
        filter: row.filter,
        header_names: headers.iter().map(|(name, _)| name.clone()).collect(),
        headers: full.then(|| headers.into_iter().collect()),
        auth,
        signature: row.signature,
        rate_limit_per_sec: row.rate_limit_per_sec.map(|n| n as u32),
        public_key: public_key(&opened.secret),
        endpoint_id: row.endpoint_id.into(),
        created_at: to_utc(row.created_at),
        updated_at: to_utc(row.updated_at),
        secret: (full && row.signature == SignatureScheme::V1).then_some(opened.secret),
    }
}

pub fn event_type(row: event_type::Model) -> dto::EventType {
    let json = |text: Option<String>| text.map(|t| json_text(&t));
    dto::EventType {
        id: row.id.into(),
        name: row.name,
        customer_id: row.customer_id.into(),
        description: row.description,
        schema: json(row.schema),
        example: json(row.example),
        created_at: to_utc(row.created_at),
        updated_at: to_utc(row.updated_at),
    }
}

pub fn message(row: message::Model) -> dto::Message {
    dto::Message {
        id: row.id.into(),
        event_id: row.event_id.into(),
        subscription_id: row.subscription_id.into(),
        endpoint_id: row.endpoint_id.into(),
        event_type: row.event_type,
        state: row.state,
        dead_reason: row.dead_reason,
        attempt_count: row.attempt_count as u32,
        // A message its subscription's pause holds has no time yet.
        next_attempt_at: row.next_attempt_at.filter(|&at| at != PAUSED).map(to_utc),
        created_at: to_utc(row.created_at),
        delivered_at: row.delivered_at.map(to_utc),
        last_status: row.last_status.map(|s| s as u16),
    }
}

pub fn attempt(row: attempt::Model) -> dto::Attempt {
    dto::Attempt {
        number: row.number as u32,
        started_at: to_utc(row.started_at),
        duration_ms: row.duration_ms.max(0) as u64,
        status_code: row.status_code.map(|s| s as u16),
        error_kind: row.error_kind,
        outcome: row.outcome,
        error_detail: row.error_detail,
        request_headers: json_text(&row.request_headers),
        response_headers: json_text(&row.response_headers),
        response_body: row.response_body,
        trace_id: row.trace_id,
        series: 0,
    }
}

/// A message's attempts with the series each belongs to: an attempt after the `n`-th of the
/// sorted `starts` (the attempt counts at which replays began) is in series `n`.
pub fn attempts_in_series(rows: Vec<attempt::Model>, mut starts: Vec<u32>) -> Vec<dto::Attempt> {
    starts.sort_unstable();
    starts.dedup();
    starts.retain(|&s| s > 0);
    rows.into_iter()
        .map(|row| {
            let number = row.number.max(0) as u32;
            dto::Attempt { series: starts.iter().filter(|&&s| number > s).count() as u32, ..attempt(row) }
        })
        .collect()
}

/// The window's counts are as of `now_ms`.
pub fn endpoint(row: endpoint::Model, now_ms: i64, window_ms: i64) -> dto::Endpoint {
    let (window_attempts, window_failures) = Window::from_json(&row.window_buckets).totals(now_ms, window_ms);
    dto::Endpoint {
        id: row.id.into(),
        customer_id: row.customer_id.into(),
        url: row.url,
        state: row.state,
        consecutive_failures: row.consecutive_failures.max(0) as u64,
        window_attempts,
        window_failures,
        last_success_at: row.last_success_at.map(to_utc),
        last_failure_at: row.last_failure_at.map(to_utc),
        next_probe_at: row.next_probe_at.map(to_utc),
    }
}

pub fn api_key(row: api_key::Model) -> dto::ApiKey {
    dto::ApiKey {
        id: row.id.into(),
        customer_id: row.customer_id.into(),
        name: row.name,
        created_at: to_utc(row.created_at),
    }
}

pub fn audit(row: audit::Model) -> dto::AuditEntry {
    dto::AuditEntry {
        id: row.id.into(),
        at: to_utc(row.at),
        actor: row.actor,
        action: row.action,
        target: row.target,
        detail: json_text(&row.detail),
    }
}
