//! JSON shapes that the REST API answers and the dashboard shows.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::states::{
    ContentMode, EndpointState, ErrorKind, MessageState, Outcome, ReplayKind, ReplayState, Role, SignatureScheme,
    SubscriptionStatus,
};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// `dead_reason` is stored as text; its schema lists the reasons as the JSON spells them.
#[cfg(feature = "openapi")]
mod openapi {
    use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};

    use crate::policy::DeadReason;

    /// Any JSON value.
    pub fn any_json() -> Object {
        ObjectBuilder::new().schema_type(SchemaType::AnyValue).build()
    }

    /// A JSON Schema document (an object or a boolean), or null.
    pub fn json_schema() -> Object {
        ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::Object, Type::Boolean, Type::Null])).build()
    }

    pub fn dead_reason() -> Object {
        let mut values: Vec<serde_json::Value> = DeadReason::ALL.iter().map(|r| r.as_str().into()).collect();
        values.push(serde_json::Value::Null);
        ObjectBuilder::new()
            .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
            .enum_values(Some(values))
            .build()
    }
}

/// What an admin's unlock does with the messages the lock held: deliver them
/// (the default), end them `dead` (`expired`), or end those created more than
/// a number of seconds ago and deliver the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Backlog {
    #[default]
    Deliver,
    Dead,
    DeadOlderThan {
        secs: i64,
    },
}

impl Backlog {
    /// The choice as the API names it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Backlog::Deliver => "deliver",
            Backlog::Dead => "dead",
            Backlog::DeadOlderThan { .. } => "dead_older_than",
        }
    }
}

/// One page of a list, newest first. `next_cursor` is null on the last page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Page<T> {
    pub data: Vec<T>,
    pub next_cursor: Option<String>,
    /// Present when a filter that no index answers (an event type, a source, `since`, a state
    /// across customers) stopped this page's search before it filled: it read as far back as
    /// this time. `next_cursor` searches on from there; a time window (`until`), a
    /// subscription or a customer narrows what each page reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub searched_back_to: Option<DateTime<Utc>>,
}

impl<T> Page<T> {
    /// A page whose search read everything its filter selects.
    pub fn of(data: Vec<T>, next_cursor: Option<String>) -> Page<T> {
        Page { data, next_cursor, searched_back_to: None }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Customer {
    pub id: String,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

/// An API key as created: `token` appears only in this answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ApiKeyCreated {
    pub id: String,
    pub customer_id: String,
    pub name: String,
    pub token: String,
    pub created_at: DateTime<Utc>,
}

/// An API key as listed: never its token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ApiKey {
    pub id: String,
    pub customer_id: String,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct User {
    pub id: String,
    pub username: String,
    pub role: Role,
    pub customer_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Subscription {
    pub id: String,
    pub customer_id: String,
    pub name: String,
    pub url: String,
    pub event_types: Vec<String>,
    /// The policy in canonical form (`{"kind":…}` with every number spelled out).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub retry_policy: Value,
    pub timeout_ms: u32,
    pub content_mode: ContentMode,
    pub status: SubscriptionStatus,
    /// The CEL expression an event must satisfy to reach the subscription; `null` when every event
    /// of its types does.
    #[serde(default)]
    pub filter: Option<String>,
    /// The names of the extra request headers sent with every delivery.
    #[serde(default)]
    pub header_names: Vec<String>,
    /// The extra request headers with their values; present when the subscription is read one at
    /// a time.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub headers: Option<std::collections::BTreeMap<String, String>>,
    /// How Herald authenticates to the receiver: the kind and the parts that are not secret;
    /// `null` when it does not.
    #[serde(default)]
    pub auth: Option<AuthView>,
    /// `v1` (HMAC-SHA256 with `secret`) or `v1a` (Ed25519, verified with `public_key`).
    #[serde(default = "default_signature")]
    pub signature: SignatureScheme,
    /// At most this many attempts a second to the endpoint; `null` when unpaced.
    #[serde(default)]
    pub rate_limit_per_sec: Option<u32>,
    /// With `v1a`: the Ed25519 public key (`whpk_` and the base64 of 32 bytes) a receiver
    /// verifies signatures with.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub public_key: Option<String>,
    pub endpoint_id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The `v1` signing secret; present when the subscription is read one at a time.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub secret: Option<String>,
}

fn default_signature() -> SignatureScheme {
    SignatureScheme::V1
}

/// A subscription's credentials as shown: never a token, a password or a client secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct AuthView {
    /// `bearer`, `basic` or `oauth2`.
    pub kind: String,
    /// `basic`: the user name.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub username: Option<String>,
    /// `oauth2`: where tokens are requested.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub token_url: Option<String>,
    /// `oauth2`: the client's id.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub client_id: Option<String>,
    /// `oauth2`: the scope requested, if any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scope: Option<String>,
}

/// A type of the customer's event-type catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct EventType {
    pub id: String,
    pub name: String,
    pub customer_id: String,
    pub description: Option<String>,
    /// The JSON Schema (draft 2020-12) every published event of the type's `data` must satisfy.
    #[cfg_attr(feature = "openapi", schema(schema_with = openapi::json_schema))]
    pub schema: Option<Value>,
    /// The `data` that `send-example` publishes (any JSON; `null` when there is none).
    #[cfg_attr(feature = "openapi", schema(schema_with = openapi::any_json))]
    pub example: Option<Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Whether a filter matches an event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct FilterTest {
    pub matches: bool,
    /// Why the filter failed on the event (a missing key, a type mismatch), which is no match.
    pub error: Option<String>,
}

/// A filter tried on one kept event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilterMatch {
    pub event_id: String,
    pub event_type: String,
    pub source: String,
    pub created_at: DateTime<Utc>,
    pub matches: bool,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct PublishedEvent {
    pub id: String,
    pub source: String,
    pub duplicate: bool,
    pub message_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct PublishResult {
    pub events: Vec<PublishedEvent>,
}

/// An event as the archive keeps it: its CloudEvent `id`, `source` and `type`,
/// when Herald accepted it, and its messages (one per subscription it went to,
/// replays included).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Event {
    pub id: String,
    pub source: String,
    #[serde(rename = "type")]
    pub event_type: String,
    pub published_at: DateTime<Utc>,
    pub message_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct EventDetail {
    #[serde(flatten)]
    pub summary: Event,
    /// The CloudEvent as published.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub event: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Message {
    pub id: String,
    pub event_id: String,
    pub subscription_id: String,
    pub endpoint_id: String,
    pub event_type: String,
    pub state: MessageState,
    #[cfg_attr(feature = "openapi", schema(schema_with = openapi::dead_reason))]
    pub dead_reason: Option<String>,
    pub attempt_count: u32,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub last_status: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Attempt {
    pub number: u32,
    pub started_at: DateTime<Utc>,
    pub duration_ms: u64,
    pub status_code: Option<u16>,
    pub error_kind: Option<ErrorKind>,
    pub outcome: Outcome,
    /// A short human explanation of the error, when there was one.
    pub error_detail: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub request_headers: Value,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub response_headers: Value,
    /// The first 4 KiB of the response body (lossy UTF-8).
    pub response_body: Option<String>,
    /// The W3C trace the request carried in its `traceparent` (32 lower-case hex digits): the
    /// event's own trace when it was published with one, else the message's. Null when no
    /// request was sent, and on attempts recorded before Herald sent traces.
    pub trace_id: Option<String>,
    /// The series the attempt belongs to: 0 for the first delivery, `n` for the message's `n`-th
    /// replay. (A message replayed several times before Herald kept where each replay began
    /// knows only where its latest one did.)
    pub series: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct MessageDetail {
    #[serde(flatten)]
    pub message: Message,
    /// The CloudEvent as published; null once retention removed it (`retention.events_secs`).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub event: Value,
    pub attempts: Vec<Attempt>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Endpoint {
    pub id: String,
    pub customer_id: String,
    pub url: String,
    pub state: EndpointState,
    pub consecutive_failures: u64,
    pub window_attempts: u64,
    pub window_failures: u64,
    pub last_success_at: Option<DateTime<Utc>>,
    pub last_failure_at: Option<DateTime<Utc>>,
    pub next_probe_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct PreviewAttempt {
    pub attempt: u32,
    pub offset_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Preview {
    pub attempts: Vec<PreviewAttempt>,
    pub ttl_secs: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct AuditEntry {
    pub id: String,
    pub at: DateTime<Utc>,
    pub actor: String,
    pub action: String,
    pub target: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub detail: Value,
}

/// A replay job as its start answers it: done already when it was small (at most 500 events or
/// messages), else running, with what it replayed so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ReplayStarted {
    /// `GET /api/v1/replays/{id}` follows it.
    pub replay_id: String,
    pub state: ReplayState,
    pub replayed: u64,
}

/// A replay job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Replay {
    pub id: String,
    pub kind: ReplayKind,
    pub state: ReplayState,
    /// Events or messages replayed so far (all of them once `done`).
    pub replayed: u64,
    /// What it replays, as its request said.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub request: Value,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// The logged-in dashboard user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Viewer {
    pub user_id: String,
    pub username: String,
    pub role: Role,
    pub customer_id: Option<String>,
    /// Set when the session was opened by a portal link rather than a login.
    pub portal: Option<PortalSession>,
}

impl Viewer {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// Whether this user may change anything: every role but `viewer`.
    pub fn can_change(&self) -> bool {
        self.role != Role::Viewer
    }
}

/// What a session opened by a portal link knows of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortalSession {
    pub link_id: String,
    pub customer_name: String,
    /// Where the "Back" link leads, when the link named a place.
    pub return_url: Option<String>,
}

/// A new portal link: `url` works once, and not after `expires_at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct PortalLink {
    pub url: String,
    pub expires_at: DateTime<Utc>,
}

/// Attempts in one bar of a chart (a minute of the overview's, an hour of an endpoint's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Bars before the current one (0 = the current minute or hour).
    pub ago: u32,
    pub success: u64,
    pub failure: u64,
}

/// The overview page: messages by state, the last hour's attempts per minute,
/// and the endpoints whose circuit is not closed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    pub counts: Vec<(MessageState, u64)>,
    pub per_minute: Vec<Bucket>,
    pub troubled_endpoints: Vec<Endpoint>,
}

/// The delivery log's filters as the dashboard's form sends them (empty means any).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LogFilter {
    /// The CloudEvent id of the event whose messages to list.
    pub event_id: Option<String>,
    pub subscription_id: Option<String>,
    pub state: Option<String>,
    pub event_type: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub customer_id: Option<String>,
}

/// The names of what a message belongs to, as the dashboard shows them
/// (each absent when that is gone).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Owners {
    pub subscription_name: Option<String>,
    pub endpoint_url: Option<String>,
    /// Filled in for admins only.
    pub customer_name: Option<String>,
}

/// A delivery-log row as the dashboard shows it: the message and the names of what it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    pub message: Message,
    pub owners: Owners,
}

/// A message as its dashboard page shows it: its detail, and the names of what it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageView {
    pub detail: MessageDetail,
    pub owners: Owners,
}

/// An archived event as the dashboard lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventEntry {
    pub event: Event,
    pub customer_id: String,
    /// Filled in for admins only.
    pub customer_name: Option<String>,
}

/// One option of a select: a value and the words shown for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    pub value: String,
    pub label: String,
}

/// Failed attempts of one kind over an endpoint's health window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureGroup {
    /// The status code (`503`) or error kind (`timeout`).
    pub kind: String,
    /// The kind as a person reads it (`HTTP 503`, `timeout`).
    pub label: String,
    pub count: u64,
    /// Messages that died with an attempt of this kind as their last.
    pub dead_messages: u64,
    pub latest_ms: i64,
    /// The latest such attempt's response body (its first 4 KiB) and message.
    pub latest_body: Option<String>,
    pub latest_message_id: Option<String>,
}

/// An endpoint's page: its circuit, and its health over the last 24 hours.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointHealth {
    pub endpoint: Endpoint,
    /// Filled in for admins only.
    pub customer_name: Option<String>,
    /// The subscriptions that deliver to it, by name.
    pub subscriptions: Vec<Choice>,
    /// The attempts counted, and whether they are only those among the
    /// customer's latest attempts (the window held more of them), counted
    /// since `counted_since_ms`.
    pub attempts: u64,
    pub attempts_capped: bool,
    pub counted_since_ms: Option<i64>,
    pub succeeded: u64,
    /// Time from publish (or replay, or resume) to the successful response, in milliseconds.
    pub p50_ms: Option<i64>,
    pub p95_ms: Option<i64>,
    /// How many deliveries the percentiles are taken over, and whether those
    /// are only the latest (as for the attempts).
    pub deliveries_measured: u64,
    pub deliveries_capped: bool,
    /// Attempts per hour, `ago` 0 being the current hour.
    pub hourly: Vec<Bucket>,
    pub failures: Vec<FailureGroup>,
}

/// The archive's filters as the dashboard's form sends them (empty means any).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArchiveFilter {
    /// The CloudEvent id.
    pub event_id: Option<String>,
    pub event_type: Option<String>,
    pub source: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub customer_id: Option<String>,
}
