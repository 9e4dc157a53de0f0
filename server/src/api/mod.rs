//! The REST API: thin handlers that extract, call a service, and
//! answer JSON. Each resource module registers its routes once, for the
//! router and the OpenAPI document alike.

mod admin;
mod endpoints;
mod event_types;
mod events;
pub mod extract;
pub mod idempotency;
pub mod key_cache;
pub mod limits;
mod messages;
pub mod problem;
pub mod rate_limit;
mod replays;
mod schemas;
pub mod state;
mod subscriptions;
mod system;

use std::sync::LazyLock;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::response::{IntoResponse, Response};
use domain::{dto, states};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use state::ApiState;

/// Every route, each registered once with its handler: the router and the OpenAPI document are
/// both read from it.
fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(system::router())
        .merge(admin::router())
        .merge(subscriptions::router())
        .merge(events::router())
        .merge(event_types::router())
        .merge(messages::router())
        .merge(endpoints::router())
        .merge(replays::router())
}

/// The OpenAPI document of every route, made once.
pub fn document() -> &'static utoipa::openapi::OpenApi {
    static DOCUMENT: LazyLock<utoipa::openapi::OpenApi> = LazyLock::new(|| {
        let mut document = routes().split_for_parts().1;
        idempotency::document(&mut document);
        document
    });
    &DOCUMENT
}

/// The REST routes, with bodies capped at `limits.max_body_bytes` (a 413 problem+json beyond).
pub fn router(state: ApiState) -> Router {
    let max_body_bytes = state.settings.limits.max_body_bytes;
    let (router, _) = routes().split_for_parts();
    router
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), idempotency::guard))
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
    components(schemas(
        problem::Problem, domain::errors::FieldError, domain::policy::RetryPolicy, domain::request::SubscriptionPatch, domain::request::EventTypePatch, dto::Customer, dto::ApiKeyCreated, dto::ApiKey, dto::User, dto::Subscription, dto::PublishResult,
        dto::PublishedEvent, dto::Event, dto::EventDetail, dto::Message, dto::MessageDetail, dto::Attempt, dto::Endpoint, dto::Preview,
        dto::PreviewAttempt, dto::AuditEntry, dto::ReplayStarted, dto::Replay, states::MessageState, states::Outcome,
        states::ErrorKind, states::EndpointState, states::ContentMode, states::SubscriptionStatus, states::Role,
        states::ReplayKind, states::ReplayState, states::PortalRole, dto::PortalLink,
    )),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub struct ApiDoc;
