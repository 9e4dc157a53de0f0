//! Extractors whose failures are problem+json, never axum's plain-text rejections.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header;
use axum::http::request::Parts;
use domain::event::{CloudEvent, read_publish};
use domain::query::{ReadQuery, pairs};
use domain::request::ReadBody;
use serde_json::Value;

use super::limits::nests_deeper_than;
use super::problem::ApiError;
use super::state::ApiState;
use crate::ids::token_hash;
use crate::service::customers::key_owner;
use crate::service::{Principal, ServiceError};

/// A JSON body, parsed but not yet validated. Remembers whether it came as a
/// CloudEvents batch.
struct JsonBody {
    value: Value,
    batch: bool,
}

impl FromRequest<ApiState> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &ApiState) -> Result<Self, ApiError> {
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json")
            .to_ascii_lowercase();
        let essence = content_type.split(';').next().unwrap_or("").trim().to_string();
        // curl's `-d` labels JSON as a form; the body still has to parse as JSON.
        let json_like = essence == "application/json"
            || essence.ends_with("+json")
            || essence == "application/x-www-form-urlencoded";
        if !json_like {
            return Err(ApiError::UnsupportedMediaType(format!(
                "send JSON (application/json, application/cloudevents+json or application/cloudevents-batch+json), not {essence}"
            )));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge
            } else {
                ApiError::field("body", "could not be read")
            }
        })?;
        let max_depth = state.settings.limits.max_json_depth;
        let value = if bytes.is_empty() {
            Value::Object(Default::default())
        } else if nests_deeper_than(&bytes, max_depth) {
            return Err(ApiError::field("body", &format!("nests arrays and objects deeper than {max_depth} levels")));
        } else {
            serde_json::from_slice(&bytes).map_err(|e| ApiError::field("body", &format!("is not valid JSON: {e}")))?
        };
        Ok(JsonBody { value, batch: essence == "application/cloudevents-batch+json" })
    }
}

/// A request body read by its declaration (`domain::request`), every bad field named.
pub struct Body<T>(pub T);

impl<T: ReadBody> FromRequest<ApiState> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &ApiState) -> Result<Self, ApiError> {
        let JsonBody { value, .. } = JsonBody::from_request(req, state).await?;
        T::read(&value).map(Body).map_err(ApiError::from)
    }
}

/// A publish's events: one CloudEvent, or a batch sent as `application/cloudevents-batch+json`.
pub struct Published {
    pub events: Vec<CloudEvent>,
    /// Whether they came as a batch, whose errors name each event by its place (`[3].data`).
    pub batch: bool,
}

impl FromRequest<ApiState> for Published {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &ApiState) -> Result<Self, ApiError> {
        let JsonBody { value, batch } = JsonBody::from_request(req, state).await?;
        let events = read_publish(value, batch).map_err(ApiError::from)?;
        Ok(Published { events, batch })
    }
}

/// Query parameters read by their declaration (`domain::query`), every bad one named.
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: ReadQuery> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        T::read(&pairs(parts.uri.query())).map(Params).map_err(ApiError::from)
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl FromRequestParts<ApiState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .map(str::trim)
            .filter(|t| !t.is_empty() && t.len() <= 200)
            .ok_or(ApiError::Unauthorized)?;
        if let Some(admin) = &state.settings.admin_token
            && constant_time_eq(admin.as_bytes(), token.as_bytes())
        {
            return Ok(Principal::Admin { actor: "admin-token".into() });
        }
        let hash = token_hash(token);
        let now = std::time::Instant::now();
        // While the database is away no key can be revoked, so a key seen before stays good; an
        // unknown one gets its 503 at once instead of after the pool's deadline.
        let away = state.pipeline.health.is_down();
        if let Some(known) = state.keys().get(&hash, now, away) {
            return Ok(known);
        }
        if away {
            let why = state.pipeline.health.outage_error().unwrap_or_default();
            return Err(ApiError::Service(ServiceError::Unavailable(why)));
        }
        let owner = key_owner(state, &hash).await.map_err(ApiError::Service)?.ok_or(ApiError::Unauthorized)?;
        state.keys().put(hash, owner.clone(), now);
        Ok(owner)
    }
}

/// The admin, or a 403 before the body is read: a customer's key learns nothing of an admin
/// route's body.
pub struct Admin(pub Principal);

impl FromRequestParts<ApiState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        let who = Principal::from_request_parts(parts, state).await?;
        who.require_admin().map_err(ApiError::Service)?;
        Ok(Admin(who))
    }
}
