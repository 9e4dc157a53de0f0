//! Subscription routes.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use domain::dto;
use domain::ids::SubscriptionId;
use domain::query::{CustomerPageQuery, text_of};
use domain::request::SubscriptionBody;

use super::admin::page_of;
use super::extract::{JsonBody, Params};
use super::problem::ApiResult;
use super::schemas::{CreateErrors, ListErrors, ReadErrors, SecretReadErrors, UpdateErrors};
use super::state::ApiState;
use crate::service::{Principal, subscriptions};

pub fn router() -> Router<ApiState> {
    Router::new()
        .route("/api/v1/subscriptions", post(create).get(list))
        .route("/api/v1/subscriptions/{id}", get(read).patch(update).delete(remove))
        .route("/api/v1/subscriptions/{id}/rotate-secret", post(rotate_secret))
}

#[utoipa::path(post, path = "/api/v1/subscriptions", request_body = SubscriptionBody, tag = "subscriptions",
    responses((status = 201, description = "The new subscription, with its signing `secret`", body = dto::Subscription),
        CreateErrors))]
async fn create(
    State(s): State<ApiState>,
    who: Principal,
    body: JsonBody,
) -> ApiResult<(StatusCode, Json<dto::Subscription>)> {
    Ok((StatusCode::CREATED, Json(subscriptions::create(&s, &who, &body.value).await?)))
}

#[utoipa::path(get, path = "/api/v1/subscriptions", tag = "subscriptions", params(CustomerPageQuery),
    responses((status = 200, description = "Subscriptions, newest first (without secrets)", body = dto::Page<dto::Subscription>),
        ListErrors))]
async fn list(
    State(s): State<ApiState>,
    who: Principal,
    Params(q): Params<CustomerPageQuery>,
) -> ApiResult<Json<dto::Page<dto::Subscription>>> {
    Ok(Json(subscriptions::list(&s, &who, text_of(&q.customer_id), page_of(q.limit, &q.cursor)?).await?))
}

#[utoipa::path(get, path = "/api/v1/subscriptions/{id}", tag = "subscriptions", params(("id" = String, Path, description = "The subscription", pattern = r"^[^\x00]*$")),
    responses((status = 200, description = "The subscription, with its signing `secret`", body = dto::Subscription),
        SecretReadErrors))]
async fn read(
    State(s): State<ApiState>,
    who: Principal,
    Path(id): Path<SubscriptionId>,
) -> ApiResult<Json<dto::Subscription>> {
    Ok(Json(subscriptions::get(&s, &who, &id).await?))
}

#[utoipa::path(patch, path = "/api/v1/subscriptions/{id}", tag = "subscriptions",
    // By reference: an empty body is allowed (it changes nothing), but `null` is not, and utoipa
    // would document `Option<SubscriptionPatch>` as nullable.
    request_body(content = ref("#/components/schemas/SubscriptionPatch"),
        description = "The fields to change; an empty body changes nothing", content_type = "application/json"),
    params(("id" = String, Path, description = "The subscription", pattern = r"^[^\x00]*$")),
    responses((status = 200, description = "The changed subscription, with its signing `secret`", body = dto::Subscription),
        UpdateErrors))]
async fn update(
    State(s): State<ApiState>,
    who: Principal,
    Path(id): Path<SubscriptionId>,
    body: JsonBody,
) -> ApiResult<Json<dto::Subscription>> {
    Ok(Json(subscriptions::update(&s, &who, &id, &body.value).await?))
}

#[utoipa::path(delete, path = "/api/v1/subscriptions/{id}", tag = "subscriptions", params(("id" = String, Path, description = "The subscription", pattern = r"^[^\x00]*$")),
    responses((status = 204, description = "Deleted; its undelivered messages are dead with `subscription_deleted`"),
        ReadErrors))]
async fn remove(State(s): State<ApiState>, who: Principal, Path(id): Path<SubscriptionId>) -> ApiResult<StatusCode> {
    subscriptions::delete(&s, &who, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/api/v1/subscriptions/{id}/rotate-secret", tag = "subscriptions", params(("id" = String, Path, description = "The subscription", pattern = r"^[^\x00]*$")),
    responses((status = 200, description = "The subscription with its new `secret`; the old one signs for 24 h more",
        body = dto::Subscription), ReadErrors))]
async fn rotate_secret(
    State(s): State<ApiState>,
    who: Principal,
    Path(id): Path<SubscriptionId>,
) -> ApiResult<Json<dto::Subscription>> {
    Ok(Json(subscriptions::rotate_secret(&s, &who, &id).await?))
}
