//! Subscriptions, and the preview of a retry policy's schedule.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use domain::dto;
use domain::ids::SubscriptionId;
use domain::query::{CustomerPageQuery, text_of};
use domain::request::{FilterTestBody, PreviewBody, SendExampleBody, SubscriptionBody, SubscriptionPatch};

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::admin::page_of;
use super::extract::{Body, Params};
use super::problem::ApiResult;
use super::schemas::{
    BodyErrors, CreateErrors, ListErrors, ReadErrors, SecretReadErrors, SendExampleErrors, UpdateErrors,
};
use super::state::ApiState;
use crate::service::{Principal, events, policies, subscriptions};

pub fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::default()
        .routes(routes!(create, list))
        .routes(routes!(read, update, remove))
        .routes(routes!(rotate_secret))
        .routes(routes!(filter_test))
        .routes(routes!(send_example))
        .routes(routes!(preview))
}

#[utoipa::path(post, path = "/api/v1/subscriptions", request_body = SubscriptionBody, tag = "subscriptions",
    responses((status = 201, description = "The new subscription, with its signing `secret`", body = dto::Subscription),
        CreateErrors))]
async fn create(
    State(s): State<ApiState>,
    who: Principal,
    Body(body): Body<SubscriptionBody>,
) -> ApiResult<(StatusCode, Json<dto::Subscription>)> {
    Ok((StatusCode::CREATED, Json(subscriptions::create(&s, &who, body).await?)))
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
    Body(patch): Body<SubscriptionPatch>,
) -> ApiResult<Json<dto::Subscription>> {
    Ok(Json(subscriptions::update(&s, &who, &id, patch).await?))
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

#[utoipa::path(post, path = "/api/v1/subscriptions/filter-test", tag = "subscriptions", request_body = FilterTestBody,
    responses((status = 200, description = "Whether the filter matches the event; `error` says why it failed on it (no match). \
        Nothing is stored", body = dto::FilterTest), BodyErrors))]
async fn filter_test(_who: Principal, Body(body): Body<FilterTestBody>) -> ApiResult<Json<dto::FilterTest>> {
    Ok(Json(subscriptions::test_filter(body)?))
}

#[utoipa::path(post, path = "/api/v1/subscriptions/{id}/send-example", tag = "subscriptions", request_body = SendExampleBody,
    params(("id" = String, Path, description = "The subscription", pattern = r"^[^\x00]*$")),
    responses((status = 202, description = "The catalog's example of the type, published as a real event (source \
        `/herald/example`) for this subscription only", body = dto::PublishResult), SendExampleErrors))]
async fn send_example(
    State(s): State<ApiState>,
    who: Principal,
    Path(id): Path<SubscriptionId>,
    Body(body): Body<SendExampleBody>,
) -> ApiResult<(StatusCode, Json<dto::PublishResult>)> {
    Ok((StatusCode::ACCEPTED, Json(events::send_example(&s, &who, &id, body).await?)))
}

#[utoipa::path(post, path = "/api/v1/retry-policies/preview", tag = "subscriptions", request_body = PreviewBody,
    responses((status = 200, description = "When each attempt would start if all failed (no jitter)", body = dto::Preview),
        BodyErrors))]
async fn preview(_who: Principal, Body(body): Body<PreviewBody>) -> ApiResult<Json<dto::Preview>> {
    Ok(Json(policies::preview(&body.retry_policy)))
}
