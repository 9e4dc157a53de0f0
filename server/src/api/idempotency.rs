//! `Idempotency-Key` on every `POST`, `PATCH` and `DELETE` of the API. The first request with a
//! key runs; a repeat from the same caller with the same method, path and body, within 24 h, gets
//! the first answer again with `Idempotent-Replayed: true` and changes nothing. The same key with
//! another request is refused (422); a repeat while the first still runs answers 409 with
//! `Retry-After`. Answers of 5xx, 429 and 408 are not kept, so such a request may be retried.
//!
//! A use case that changes something keeps its answer in the transaction of its change
//! ([`crate::service::idempotency`]); the answers of requests that changed nothing (a refusal, a
//! preview) are kept here, after them. A publish's answer is kept here too, after its commit:
//! a repeat that finds no answer (the process stopped in between) publishes again, and the
//! events' `(source, id)` make that a duplicate that creates nothing.

use std::collections::HashMap;
use std::sync::LazyLock;

use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{OpenApi, RefOr, Required};

use super::problem::ApiError;
use super::state::ApiState;
use crate::service::idempotency::{self, Scope};
use crate::service::{Principal, ServiceError};
use crate::store::entities::idempotency_key;
use crate::store::idempotency_keys::{self, Answer, Claim, DONE, KEPT_MS};
use crate::store::wal_flush::Flushed;

pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// How long a running request holds its key; a repeat after that runs in its place (a request
/// that is merely slow then cannot keep its answer, so its change is rolled back).
const LOCK_MS: i64 = 60_000;
/// What a repeat of a running request is told to wait, in seconds.
const RETRY_AFTER_SECS: u64 = 1;
/// The longest key.
pub const MAX_KEY_LEN: usize = 255;
/// The longest answer read back to be kept.
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// The layer: requests without a key, and reads, pass through untouched.
pub async fn guard(State(state): State<ApiState>, request: Request, next: Next) -> Response {
    let writes = matches!(*request.method(), Method::POST | Method::PATCH | Method::DELETE);
    if !writes || !request.headers().contains_key(IDEMPOTENCY_KEY) {
        return next.run(request).await;
    }
    match keyed(&state, request, next).await {
        Ok(response) | Err(response) => response,
    }
}

async fn keyed(state: &ApiState, request: Request, next: Next) -> Result<Response, Response> {
    let (mut parts, body) = request.into_parts();
    let who = Principal::from_request_parts(&mut parts, state).await.map_err(IntoResponse::into_response)?;
    let key = key_of(parts.headers.get(IDEMPOTENCY_KEY)).map_err(IntoResponse::into_response)?;
    let body = to_bytes(body, state.settings.limits.max_body_bytes)
        .await
        .map_err(|_| ApiError::PayloadTooLarge.into_response())?;
    let target = parts.uri.path_and_query().map_or(parts.uri.path(), |p| p.as_str()).to_string();
    let fingerprint = fingerprint(&parts.method, &target, &body);
    let route = parts.extensions.get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_default();
    let status = success_status(&parts.method, &route);
    let owner = rand::random::<i64>();
    let scope = Scope { caller: caller_of(&who), key, owner, status, sealer: state.sealer.clone() };
    match begin(state, &scope, &fingerprint).await.map_err(|e| ApiError::Service(e).into_response())? {
        Begun::Run => {}
        Begun::Answered(row) => return Ok(replayed(&scope, row)),
        Begun::OtherRequest => {
            let why = "was used with another method, path or body";
            return Err(ApiError::Service(ServiceError::field("Idempotency-Key", why)).into_response());
        }
        Begun::Running => return Err(in_flight()),
    }
    // Released if the request goes away before its answer (its client hung up): nothing it did
    // was committed without an answer, so a repeat may run it again at once.
    let mut held = Held { state: state.clone(), scope: Some(scope.clone()) };
    let request = Request::from_parts(parts, Body::from(body));
    let response = idempotency::within(scope.clone(), next.run(request)).await;
    held.scope = None;
    let mut response = finish(state, &scope, response).await;
    // The key's row was written before the handler ran, and its answer may be written after.
    response.extensions_mut().remove::<Flushed>();
    Ok(response)
}

/// A key held by a request still running; dropped with the request, it lets the key go.
struct Held {
    state: ApiState,
    scope: Option<Scope>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(scope) = self.scope.take() {
            let db = self.state.db.clone();
            tokio::spawn(async move {
                let _ = idempotency_keys::release(&db, &scope.caller, &scope.key, scope.owner).await;
            });
        }
    }
}

/// The key as sent: 1 to 255 visible ASCII characters.
fn key_of(value: Option<&HeaderValue>) -> Result<String, ApiError> {
    let bad = |why: &str| ApiError::field("Idempotency-Key", why);
    let value = value.ok_or_else(|| bad("is required"))?;
    let bytes = value.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_KEY_LEN {
        return Err(bad(&format!("must be 1 to {MAX_KEY_LEN} characters")));
    }
    if !bytes.iter().all(|b| b.is_ascii_graphic()) {
        return Err(bad("must be visible ASCII characters, without spaces"));
    }
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

/// Whose keys these are: the admin's, or the customer's (any of its API keys).
fn caller_of(who: &Principal) -> String {
    match who {
        Principal::Admin { .. } => "admin".to_string(),
        Principal::Customer { customer_id, .. } | Principal::Viewer { customer_id, .. } => {
            format!("customer:{customer_id}")
        }
    }
}

/// SHA-256 of the method, the path with its query, and the body.
pub fn fingerprint(method: &Method, target: &str, body: &Bytes) -> String {
    let mut hash = Sha256::new();
    hash.update(method.as_str().as_bytes());
    hash.update(b"\n");
    hash.update(target.as_bytes());
    hash.update(b"\n");
    hash.update(body);
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The status each write route answers when it succeeds, read from the OpenAPI document
/// (its one 2xx response).
fn success_status(method: &Method, route: &str) -> u16 {
    static STATUSES: LazyLock<HashMap<(String, String), u16>> = LazyLock::new(|| {
        let mut statuses = HashMap::new();
        for (path, item) in &super::document().paths.paths {
            let operations = [("POST", &item.post), ("PATCH", &item.patch), ("DELETE", &item.delete)];
            for (method, operation) in operations {
                let Some(operation) = operation else { continue };
                let success = operation.responses.responses.keys().find_map(|code| code.parse::<u16>().ok());
                if let Some(code) = success.filter(|code| (200..300).contains(code)) {
                    statuses.insert((method.to_string(), path.clone()), code);
                }
            }
        }
        statuses
    });
    STATUSES.get(&(method.as_str().to_string(), route.to_string())).copied().unwrap_or(200)
}

enum Begun {
    /// This request runs, holding the key.
    Run,
    /// The key's request was answered: this is its answer.
    Answered(idempotency_key::Model),
    /// The key was used with another request.
    OtherRequest,
    /// The key's first request is still running.
    Running,
}

/// Takes the key for this request, or says why not.
async fn begin(state: &ApiState, scope: &Scope, fingerprint: &str) -> Result<Begun, ServiceError> {
    let now = state.now_ms();
    let claim = Claim {
        caller: &scope.caller,
        key: &scope.key,
        fingerprint,
        owner: scope.owner,
        now_ms: now,
        locked_until: now + LOCK_MS,
    };
    if idempotency_keys::insert(&state.db, &claim).await? {
        return Ok(Begun::Run);
    }
    let found = match idempotency_keys::get(&state.db, &scope.caller, &scope.key).await? {
        // A key older than its 24 h that the sweep has not removed yet is new again.
        Some(found) if found.created_at < now - KEPT_MS => {
            idempotency_keys::remove_expired(&state.db, &scope.caller, &scope.key, now - KEPT_MS).await?;
            None
        }
        found => found,
    };
    let Some(found) = found else {
        // Gone in between (its request failed in a way worth retrying), or expired: this one runs.
        return Ok(if idempotency_keys::insert(&state.db, &claim).await? { Begun::Run } else { Begun::Running });
    };
    Ok(if found.fingerprint != fingerprint {
        Begun::OtherRequest
    } else if found.state == DONE {
        Begun::Answered(found)
    } else if found.locked_until <= now && idempotency_keys::take_over(&state.db, &found, &claim).await? {
        Begun::Run
    } else {
        Begun::Running
    })
}

/// Whether an answer is one to keep: not a 5xx, a 429 or a 408, which say to try again.
fn kept(status: StatusCode) -> bool {
    !(status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::REQUEST_TIMEOUT)
}

/// Keeps the answer (unless it says to try again, or the change kept it already) and gives it back.
async fn finish(state: &ApiState, scope: &Scope, response: Response) -> Response {
    let release = || async {
        if let Err(e) = idempotency_keys::release(&state.db, &scope.caller, &scope.key, scope.owner).await {
            tracing::warn!(error = %e, "an idempotency key stays taken until its lock ends");
        }
    };
    let (parts, body) = response.into_parts();
    if !kept(parts.status) {
        release().await;
        return Response::from_parts(parts, body);
    }
    let Ok(bytes) = to_bytes(body, MAX_ANSWER_BYTES).await else {
        release().await;
        let unreadable = ServiceError::Unavailable("the answer could not be read".into());
        return ApiError::Service(unreadable).into_response();
    };
    let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let body = (!bytes.is_empty()).then(|| scope.seal(&String::from_utf8_lossy(&bytes)));
    let answer = Answer { status: parts.status.as_u16(), content_type, body };
    // Nothing to do when the change kept it already, in its own transaction.
    if let Err(e) = idempotency_keys::answer(&state.db, &scope.caller, &scope.key, scope.owner, answer).await {
        tracing::warn!(error = %e, "the answer to an idempotency key was not kept");
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// The kept answer, marked as a repeat.
fn replayed(scope: &Scope, row: idempotency_key::Model) -> Response {
    let status = row.status.and_then(|s| StatusCode::from_u16(s as u16).ok()).unwrap_or(StatusCode::OK);
    let body = match row.body.as_deref().map(|sealed| scope.open(sealed)).transpose() {
        Ok(body) => body.unwrap_or_default(),
        Err(e) => return ApiError::Service(ServiceError::Unsealable(e)).into_response(),
    };
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    match row.content_type.as_deref().and_then(|t| HeaderValue::from_str(t).ok()) {
        Some(content_type) => headers.insert(header::CONTENT_TYPE, content_type),
        None => headers.remove(header::CONTENT_TYPE),
    };
    headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    response
}

/// 409: the first request with this key is still running.
fn in_flight() -> Response {
    let detail = "a request with this Idempotency-Key is still running; retry shortly";
    let mut response = ApiError::Service(ServiceError::Conflict(detail.into())).into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    response
}

/// Documents the key on every write route of `openapi`: the header, what a repeat answers, and
/// the 400, 409 and 422 it may get.
pub fn document(openapi: &mut OpenApi) {
    for item in openapi.paths.paths.values_mut() {
        for operation in [&mut item.post, &mut item.patch, &mut item.delete].into_iter().flatten() {
            let schema = ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(MAX_KEY_LEN))
                .pattern(Some("^[!-~]+$"));
            let parameter = ParameterBuilder::new()
                .name("Idempotency-Key")
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .description(Some(
                    "Makes the request safe to retry: a repeat from the same caller with the same key, method, \
                     path and body within 24 h gets the first answer again (with `Idempotent-Replayed: true`) and \
                     changes nothing. The same key with another request: 422; while the first still runs: 409 \
                     with `Retry-After`. Answers of 5xx, 429 and 408 are not kept: the request may be retried.",
                ))
                .schema(Some(schema))
                .build();
            operation.parameters.get_or_insert_with(Vec::new).push(parameter);
            let responses = &mut operation.responses.responses;
            for response in responses.iter_mut().filter(|(code, _)| code.starts_with('2')).map(|(_, r)| r) {
                if let RefOr::T(response) = response {
                    let header = HeaderBuilder::new()
                        .schema(ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["true"])))
                        .description(Some("Present on a repeat: this is the first answer to the key, again"))
                        .build();
                    response.headers.insert("Idempotent-Replayed".into(), header);
                }
            }
            for status in [400, 409, 422] {
                let (code, response) = super::schemas::problem(status);
                responses.entry(code).or_insert(response);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_one_to_255_visible_ascii_characters() {
        let key = |text: &str| key_of(Some(&HeaderValue::from_bytes(text.as_bytes()).unwrap())).map_err(|_| ());
        assert_eq!(key("order-42/ü"), Err(()));
        assert_eq!(key("a b"), Err(()));
        assert_eq!(key(""), Err(()));
        assert_eq!(key(&"k".repeat(MAX_KEY_LEN)).map(|k| k.len()), Ok(MAX_KEY_LEN));
        assert_eq!(key(&"k".repeat(MAX_KEY_LEN + 1)), Err(()));
        assert_eq!(key("9b2f:order-42"), Ok("9b2f:order-42".to_string()));
    }

    #[test]
    fn each_write_route_has_its_success_status() {
        assert_eq!(success_status(&Method::POST, "/api/v1/subscriptions"), 201);
        assert_eq!(success_status(&Method::DELETE, "/api/v1/subscriptions/{id}"), 204);
        assert_eq!(success_status(&Method::POST, "/api/v1/events"), 202);
        assert_eq!(success_status(&Method::PATCH, "/api/v1/event-types/{name}"), 200);
    }

    #[test]
    fn the_fingerprint_tells_method_path_and_body_apart() {
        let body = Bytes::from_static(b"{}");
        let base = fingerprint(&Method::POST, "/api/v1/customers", &body);
        assert_ne!(base, fingerprint(&Method::PATCH, "/api/v1/customers", &body));
        assert_ne!(base, fingerprint(&Method::POST, "/api/v1/customers?x=1", &body));
        assert_ne!(base, fingerprint(&Method::POST, "/api/v1/customers", &Bytes::from_static(b"{ }")));
        assert_eq!(base, fingerprint(&Method::POST, "/api/v1/customers", &body));
    }
}
