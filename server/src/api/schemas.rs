//! Request shapes, for the OpenAPI document. Handlers read bodies field by
//! field (so every error names its field); these types only describe them.

#![allow(dead_code)]

use serde::Deserialize;
use utoipa::ToSchema;

#[derive(Deserialize, ToSchema)]
pub struct NameBody {
    pub name: String,
}

#[derive(Deserialize, ToSchema)]
pub struct UserBody {
    pub username: String,
    pub password: String,
    /// `admin` or `customer`.
    pub role: String,
    pub customer_id: Option<String>,
}

#[derive(Deserialize, ToSchema)]
pub struct SubscriptionBody {
    pub name: String,
    pub url: String,
    pub event_types: Vec<String>,
    /// A preset name (`workfront`, `event-grid`, `eventarc`), `{"kind": preset}`, or a custom policy.
    #[schema(value_type = Object)]
    pub retry_policy: Option<serde_json::Value>,
    pub timeout_ms: Option<u32>,
    /// `structured` (default) or `binary`.
    pub content_mode: Option<String>,
    /// `active` (default) or `paused`.
    pub status: Option<String>,
    /// The admin names the customer.
    pub customer_id: Option<String>,
}

#[derive(Deserialize, ToSchema)]
pub struct SubscriptionPatch {
    pub name: Option<String>,
    pub url: Option<String>,
    pub event_types: Option<Vec<String>>,
    #[schema(value_type = Object)]
    pub retry_policy: Option<serde_json::Value>,
    pub timeout_ms: Option<u32>,
    pub content_mode: Option<String>,
    pub status: Option<String>,
}

/// A CloudEvent 1.0 in JSON (`specversion`, `id`, `source`, `type`, optional
/// attributes, `data` or `data_base64`, extensions).
#[derive(Deserialize, ToSchema)]
pub struct CloudEventBody {
    pub specversion: String,
    pub id: String,
    pub source: String,
    #[serde(rename = "type")]
    pub event_type: String,
    #[schema(value_type = Object)]
    pub data: Option<serde_json::Value>,
}

#[derive(Deserialize, ToSchema)]
pub struct BulkReplayBody {
    pub subscription_id: Option<String>,
    /// Must be `dead`.
    pub state: String,
    pub since: Option<String>,
    pub until: Option<String>,
    pub customer_id: Option<String>,
}

#[derive(Deserialize, ToSchema)]
pub struct PreviewBody {
    #[schema(value_type = Object)]
    pub retry_policy: serde_json::Value,
}
