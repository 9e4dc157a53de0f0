//! Publishing, the delivery log, replay, endpoints and the policy preview.

use app::domain::dto;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use super::admin::PageParams;
use super::extract::{JsonBody, Params};
use super::problem::{ApiResult, Problem};
use super::schemas::{BulkReplayBody, CloudEventBody, PreviewBody};
use super::subscriptions::ListParams;
use crate::service::messages::ListQuery;
use crate::service::{Principal, endpoints, events, messages, policies};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/events", post(publish))
        .route("/api/v1/messages", get(list_messages))
        .route("/api/v1/messages/replay", post(replay_bulk))
        .route("/api/v1/messages/{id}", get(message_detail))
        .route("/api/v1/messages/{id}/replay", post(replay_one))
        .route("/api/v1/endpoints", get(list_endpoints))
        .route("/api/v1/endpoints/{id}/unlock", post(unlock))
        .route("/api/v1/retry-policies/preview", post(preview))
}

#[derive(Deserialize, Default)]
struct CustomerParam {
    customer_id: Option<String>,
}

#[utoipa::path(post, path = "/api/v1/events", tag = "events",
    request_body(content = CloudEventBody, content_type = "application/cloudevents+json",
        description = "One CloudEvent, or a JSON array of them as application/cloudevents-batch+json"),
    params(("customer_id" = Option<String>, Query, description = "the customer, when the admin publishes")),
    responses((status = 202, body = dto::PublishResult), (status = 422, body = Problem), (status = 400, body = Problem)))]
async fn publish(
    State(s): State<AppState>,
    who: Principal,
    Params(q): Params<CustomerParam>,
    body: JsonBody,
) -> ApiResult<(StatusCode, Json<dto::PublishResult>)> {
    let parsed = events::parse(body.value, body.batch)?;
    Ok((StatusCode::ACCEPTED, Json(events::publish(&s, &who, q.customer_id.as_deref(), parsed).await?)))
}

#[derive(Deserialize, Default)]
struct MessageParams {
    limit: Option<String>,
    cursor: Option<String>,
    #[serde(flatten)]
    filter: ListQuery,
}

#[utoipa::path(get, path = "/api/v1/messages", tag = "messages",
    params(("limit" = Option<u32>, Query), ("cursor" = Option<String>, Query), ("subscription_id" = Option<String>, Query),
        ("state" = Option<String>, Query), ("event_type" = Option<String>, Query), ("since" = Option<String>, Query),
        ("until" = Option<String>, Query), ("customer_id" = Option<String>, Query)),
    responses((status = 200, body = dto::Page<dto::Message>), (status = 400, body = Problem)))]
async fn list_messages(
    State(s): State<AppState>,
    who: Principal,
    Params(p): Params<MessageParams>,
) -> ApiResult<Json<dto::Page<dto::Message>>> {
    let page = PageParams { limit: p.limit, cursor: p.cursor }.page()?;
    Ok(Json(messages::list(&s, &who, &p.filter, page).await?))
}

#[utoipa::path(get, path = "/api/v1/messages/{id}", tag = "messages", params(("id" = String, Path)),
    responses((status = 200, body = dto::MessageDetail), (status = 404, body = Problem)))]
async fn message_detail(
    State(s): State<AppState>,
    who: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<dto::MessageDetail>> {
    Ok(Json(messages::detail(&s, &who, &id).await?))
}

#[utoipa::path(post, path = "/api/v1/messages/{id}/replay", tag = "messages", params(("id" = String, Path)),
    responses((status = 200, body = dto::Message), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn replay_one(
    State(s): State<AppState>,
    who: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<dto::Message>> {
    Ok(Json(messages::replay_one(&s, &who, &id).await?))
}

#[utoipa::path(post, path = "/api/v1/messages/replay", tag = "messages", request_body = BulkReplayBody,
    responses((status = 202, body = dto::ReplayResult), (status = 422, body = Problem)))]
async fn replay_bulk(
    State(s): State<AppState>,
    who: Principal,
    body: JsonBody,
) -> ApiResult<(StatusCode, Json<dto::ReplayResult>)> {
    Ok((StatusCode::ACCEPTED, Json(messages::replay_bulk(&s, &who, &body.value).await?)))
}

#[utoipa::path(get, path = "/api/v1/endpoints", tag = "endpoints",
    params(("limit" = Option<u32>, Query), ("cursor" = Option<String>, Query), ("customer_id" = Option<String>, Query)),
    responses((status = 200, body = dto::Page<dto::Endpoint>)))]
async fn list_endpoints(
    State(s): State<AppState>,
    who: Principal,
    Params(p): Params<ListParams>,
) -> ApiResult<Json<dto::Page<dto::Endpoint>>> {
    let page = PageParams { limit: p.limit, cursor: p.cursor }.page()?;
    Ok(Json(endpoints::list(&s, &who, p.customer_id.as_deref(), page).await?))
}

#[utoipa::path(post, path = "/api/v1/endpoints/{id}/unlock", tag = "endpoints", params(("id" = String, Path)),
    responses((status = 200, body = dto::Endpoint), (status = 403, body = Problem), (status = 404, body = Problem)))]
async fn unlock(State(s): State<AppState>, who: Principal, Path(id): Path<String>) -> ApiResult<Json<dto::Endpoint>> {
    Ok(Json(endpoints::unlock(&s, &who, &id).await?))
}

#[utoipa::path(post, path = "/api/v1/retry-policies/preview", tag = "subscriptions", request_body = PreviewBody,
    responses((status = 200, body = dto::Preview), (status = 422, body = Problem)))]
async fn preview(_who: Principal, body: JsonBody) -> ApiResult<Json<dto::Preview>> {
    Ok(Json(policies::preview(&body.value)?))
}
