//! Health, metrics and the OpenAPI document: open to anyone.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::service::liveness;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::problem::UNAVAILABLE_RETRY_AFTER;
use super::schemas::{Health, OpenErrors};
use super::state::ApiState;

pub fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::default().routes(routes!(healthz)).routes(routes!(metrics)).routes(routes!(openapi))
}

/// The longest `/healthz` waits for the database: a load balancer's check gets its answer within a second.
const HEALTH_DEADLINE: Duration = Duration::from_millis(800);

#[utoipa::path(get, path = "/healthz", tag = "system", security(),
    responses((status = 200, description = "The server and its database answer", body = Health),
        (status = 503, description = "The database does not answer (within 0.8 s, or it is in an outage)",
            body = Health, headers(("Retry-After" = u64, description = "Seconds to wait before asking again"))),
        OpenErrors))]
async fn healthz(State(s): State<ApiState>) -> Response {
    let error = liveness::database_problem(&s, HEALTH_DEADLINE).await;
    let database = s.pipeline.health.name();
    match error {
        None => (StatusCode::OK, Json(json!({"status": "ok", "database": database}))).into_response(),
        Some(error) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, UNAVAILABLE_RETRY_AFTER.to_string())],
            Json(json!({"status": "database unavailable", "database": database, "error": error})),
        )
            .into_response(),
    }
}

#[utoipa::path(get, path = "/metrics", tag = "system", security(),
    responses((status = 200, description = "Prometheus text exposition format", body = String, content_type = "text/plain"),
        OpenErrors))]
async fn metrics(State(s): State<ApiState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], s.metrics().render())
}

#[utoipa::path(get, path = "/api/openapi.json", tag = "system", security(),
    responses((status = 200, description = "This document", body = Object, content_type = "application/json"), OpenErrors))]
async fn openapi() -> impl IntoResponse {
    Json(super::document())
}
