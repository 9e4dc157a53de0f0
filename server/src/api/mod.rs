//! The REST API: thin handlers that extract, call a service, and
//! answer JSON. Each resource module exports its own router.

mod admin;
mod delivery;
pub mod extract;
pub mod key_cache;
pub mod limits;
pub mod problem;
pub mod rate_limit;
mod schemas;
pub mod state;
mod subscriptions;
mod system;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::response::{IntoResponse, Response};
use domain::{dto, states};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use state::ApiState;

/// The REST routes, with bodies capped at `limits.max_body_bytes` (a 413 problem+json beyond).
pub fn router(state: ApiState) -> Router {
    let max_body_bytes = state.settings.limits.max_body_bytes;
    Router::new()
        .merge(system::router())
        .merge(admin::router())
        .merge(subscriptions::router())
        .merge(delivery::router())
        .method_not_allowed_fallback(|| async { problem::ApiError::MethodNotAllowed })
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}

/// The answer to a path under `/api/` that no route serves.
pub fn not_found() -> Response {
    problem::ApiError::NotFound.into_response()
}

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "Herald", description = "Event delivery to webhooks: at least once, signed, with retries, circuit breakers and replay."),
    paths(
        system::healthz, system::metrics, system::openapi,
        admin::create_customer, admin::list_customers, admin::create_api_key, admin::list_api_keys,
        admin::revoke_api_key, admin::create_user, admin::audit_log,
        subscriptions::create, subscriptions::list, subscriptions::read, subscriptions::update, subscriptions::remove,
        subscriptions::rotate_secret,
        delivery::publish, delivery::list_events, delivery::event_detail, delivery::event_named_replay, delivery::replay_window, delivery::list_messages, delivery::message_detail, delivery::replay_one, delivery::replay_bulk,
        delivery::list_endpoints, delivery::unlock, delivery::preview,
    ),
    components(schemas(
        problem::Problem, domain::errors::FieldError, domain::policy::RetryPolicy, domain::request::SubscriptionPatch, dto::Customer, dto::ApiKeyCreated, dto::ApiKey, dto::User, dto::Subscription, dto::PublishResult,
        dto::PublishedEvent, dto::Event, dto::EventDetail, dto::Message, dto::MessageDetail, dto::Attempt, dto::Endpoint, dto::Preview,
        dto::PreviewAttempt, dto::AuditEntry, dto::ReplayResult, states::MessageState, states::Outcome,
        states::ErrorKind, states::EndpointState, states::ContentMode, states::SubscriptionStatus, states::Role,
    )),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub struct ApiDoc;
