//! Health, metrics and the OpenAPI document: open to anyone.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use sea_orm::ConnectionTrait;
use utoipa::OpenApi;

use super::ApiDoc;
use super::schemas::{Health, OpenErrors};
use super::state::ApiState;

pub fn router() -> Router<ApiState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/api/openapi.json", get(openapi))
}

#[utoipa::path(get, path = "/healthz", tag = "system", security(),
    responses((status = 200, description = "The server and its database answer", body = Health),
        (status = 503, description = "The database does not answer", body = Health), OpenErrors))]
async fn healthz(State(s): State<ApiState>) -> impl IntoResponse {
    let ok = s.db.execute_unprepared("SELECT 1").await.is_ok();
    let status = if ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, Json(serde_json::json!({"status": if ok { "ok" } else { "database unavailable" }})))
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
    Json(ApiDoc::openapi())
}
