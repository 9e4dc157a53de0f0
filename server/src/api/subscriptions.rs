//! Subscription routes.

use app::domain::dto;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use super::admin::PageParams;
use super::extract::{JsonBody, Params};
use super::problem::{ApiResult, Problem};
use super::schemas::{SubscriptionBody, SubscriptionPatch};
use crate::service::{Principal, subscriptions};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/subscriptions", post(create).get(list))
        .route("/api/v1/subscriptions/{id}", get(read).patch(update).delete(remove))
        .route("/api/v1/subscriptions/{id}/rotate-secret", post(rotate_secret))
}

#[derive(Deserialize, Default)]
pub struct ListParams {
    pub limit: Option<String>,
    pub cursor: Option<String>,
    pub customer_id: Option<String>,
}

#[utoipa::path(post, path = "/api/v1/subscriptions", request_body = SubscriptionBody, tag = "subscriptions",
    responses((status = 201, body = dto::Subscription), (status = 422, body = Problem), (status = 401, body = Problem)))]
async fn create(
    State(s): State<AppState>,
    who: Principal,
    body: JsonBody,
) -> ApiResult<(StatusCode, Json<dto::Subscription>)> {
    Ok((StatusCode::CREATED, Json(subscriptions::create(&s, &who, &body.value).await?)))
}

#[utoipa::path(get, path = "/api/v1/subscriptions", tag = "subscriptions",
    params(("limit" = Option<u32>, Query), ("cursor" = Option<String>, Query), ("customer_id" = Option<String>, Query)),
    responses((status = 200, body = dto::Page<dto::Subscription>), (status = 401, body = Problem)))]
async fn list(
    State(s): State<AppState>,
    who: Principal,
    Params(p): Params<ListParams>,
) -> ApiResult<Json<dto::Page<dto::Subscription>>> {
    let page = PageParams { limit: p.limit, cursor: p.cursor }.page()?;
    Ok(Json(subscriptions::list(&s, &who, p.customer_id.as_deref(), page).await?))
}

#[utoipa::path(get, path = "/api/v1/subscriptions/{id}", tag = "subscriptions", params(("id" = String, Path)),
    responses((status = 200, body = dto::Subscription), (status = 404, body = Problem)))]
async fn read(State(s): State<AppState>, who: Principal, Path(id): Path<String>) -> ApiResult<Json<dto::Subscription>> {
    Ok(Json(subscriptions::get(&s, &who, &id).await?))
}

#[utoipa::path(patch, path = "/api/v1/subscriptions/{id}", request_body = SubscriptionPatch, tag = "subscriptions",
    params(("id" = String, Path)),
    responses((status = 200, body = dto::Subscription), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn update(
    State(s): State<AppState>,
    who: Principal,
    Path(id): Path<String>,
    body: JsonBody,
) -> ApiResult<Json<dto::Subscription>> {
    Ok(Json(subscriptions::update(&s, &who, &id, &body.value).await?))
}

#[utoipa::path(delete, path = "/api/v1/subscriptions/{id}", tag = "subscriptions", params(("id" = String, Path)),
    responses((status = 204), (status = 404, body = Problem)))]
async fn remove(State(s): State<AppState>, who: Principal, Path(id): Path<String>) -> ApiResult<StatusCode> {
    subscriptions::delete(&s, &who, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/api/v1/subscriptions/{id}/rotate-secret", tag = "subscriptions", params(("id" = String, Path)),
    responses((status = 200, body = dto::Subscription), (status = 404, body = Problem)))]
async fn rotate_secret(
    State(s): State<AppState>,
    who: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<dto::Subscription>> {
    Ok(Json(subscriptions::rotate_secret(&s, &who, &id).await?))
}
