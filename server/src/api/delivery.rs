//! Publishing, the delivery log, replay, endpoints and the policy preview.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use domain::dto;
use domain::event::schema::{CloudEventBatch, CloudEventBody};
use domain::ids::{EndpointId, MessageId};
use domain::query::{CustomerPageQuery, CustomerQuery, EventKeyQuery, EventQuery, MessageQuery, text_of};
use domain::request::{BulkReplayBody, PreviewBody, ReplayWindowBody, UnlockBody};

use super::admin::page_of;
use super::extract::{JsonBody, Params};
use super::problem::ApiResult;
use super::rate_limit::PublishPermit;
use super::schemas::{
    BodyErrors, EventReadErrors, ListErrors, PublishErrors, ReadErrors, ReplayErrors, UnlockErrors, WindowReplayErrors,
};
use super::state::ApiState;
use crate::service::{Principal, ServiceError, endpoints, events, messages, policies};

pub fn router() -> Router<ApiState> {
    Router::new()
        .route("/api/v1/events", post(publish).get(list_events))
        // `GET /api/v1/events/replay` is the event whose id is `replay`.
        .route("/api/v1/events/replay", post(replay_window).get(event_named_replay))
        .route("/api/v1/events/{id}", get(event_detail))
        .route("/api/v1/messages", get(list_messages))
        .route("/api/v1/messages/replay", post(replay_bulk))
        .route("/api/v1/messages/{id}", get(message_detail))
        .route("/api/v1/messages/{id}/replay", post(replay_one))
        .route("/api/v1/endpoints", get(list_endpoints))
        .route("/api/v1/endpoints/{id}/unlock", post(unlock))
        .route("/api/v1/retry-policies/preview", post(preview))
}

#[utoipa::path(post, path = "/api/v1/events", tag = "events",
    request_body(
        content((CloudEventBody = "application/cloudevents+json"), (CloudEventBatch = "application/cloudevents-batch+json"),
            (CloudEventBody = "application/json")),
        description = "One CloudEvent, or a batch of 1 to 1000 as application/cloudevents-batch+json"),
    params(CustomerQuery),
    responses((status = 202, description = "Committed; one entry per event, in order (`duplicate` when `(source, id)` was published before)",
        body = dto::PublishResult), PublishErrors))]
async fn publish(
    State(s): State<ApiState>,
    PublishPermit(who): PublishPermit,
    Params(q): Params<CustomerQuery>,
    body: JsonBody,
) -> ApiResult<(StatusCode, Json<dto::PublishResult>)> {
    let parsed = events::parse(body.value, body.batch)?;
    Ok((StatusCode::ACCEPTED, Json(events::publish(&s, &who, text_of(&q.customer_id), parsed).await?)))
}

#[utoipa::path(get, path = "/api/v1/events", tag = "events", params(EventQuery),
    responses((status = 200, description = "Kept events, newest first", body = dto::Page<dto::Event>), ListErrors))]
async fn list_events(
    State(s): State<ApiState>,
    who: Principal,
    Params(q): Params<EventQuery>,
) -> ApiResult<Json<dto::Page<dto::Event>>> {
    let page = page_of(q.limit, &q.cursor)?;
    Ok(Json(events::list(&s, &who, &q, page).await?))
}

#[utoipa::path(get, path = "/api/v1/events/{id}", tag = "events",
    params(("id" = String, Path, description = "The event's CloudEvent id", pattern = r"^[^\x00]*$"), EventKeyQuery),
    responses((status = 200, description = "The event as published, with its messages", body = dto::EventDetail),
        EventReadErrors))]
async fn event_detail(
    State(s): State<ApiState>,
    who: Principal,
    Path(id): Path<String>,
    Params(q): Params<EventKeyQuery>,
) -> ApiResult<Json<dto::EventDetail>> {
    Ok(Json(events::get(&s, &who, text_of(&q.customer_id), &id, text_of(&q.source)).await?))
}

#[utoipa::path(get, path = "/api/v1/events/replay", tag = "events", params(EventKeyQuery),
    responses((status = 200, description = "The event whose CloudEvent id is `replay` (`GET /api/v1/events/{id}`)",
        body = dto::EventDetail), EventReadErrors))]
async fn event_named_replay(
    State(s): State<ApiState>,
    who: Principal,
    Params(q): Params<EventKeyQuery>,
) -> ApiResult<Json<dto::EventDetail>> {
    Ok(Json(events::get(&s, &who, text_of(&q.customer_id), "replay", text_of(&q.source)).await?))
}

#[utoipa::path(post, path = "/api/v1/events/replay", tag = "events", request_body = ReplayWindowBody,
    responses((status = 202, description = "How many new messages the window's events got", body = dto::ReplayResult),
        WindowReplayErrors))]
async fn replay_window(
    State(s): State<ApiState>,
    who: Principal,
    body: JsonBody,
) -> ApiResult<(StatusCode, Json<dto::ReplayResult>)> {
    Ok((StatusCode::ACCEPTED, Json(events::replay_window(&s, &who, &body.value).await?)))
}

#[utoipa::path(get, path = "/api/v1/messages", tag = "messages", params(MessageQuery),
    responses((status = 200, description = "Messages, newest first", body = dto::Page<dto::Message>), ListErrors))]
async fn list_messages(
    State(s): State<ApiState>,
    who: Principal,
    Params(q): Params<MessageQuery>,
) -> ApiResult<Json<dto::Page<dto::Message>>> {
    let page = page_of(q.limit, &q.cursor)?;
    Ok(Json(messages::list(&s, &who, &q, page).await?))
}

#[utoipa::path(get, path = "/api/v1/messages/{id}", tag = "messages", params(("id" = String, Path, description = "The message", pattern = r"^[^\x00]*$")),
    responses((status = 200, description = "The message with its event and every attempt", body = dto::MessageDetail),
        ReadErrors))]
async fn message_detail(
    State(s): State<ApiState>,
    who: Principal,
    Path(id): Path<MessageId>,
) -> ApiResult<Json<dto::MessageDetail>> {
    Ok(Json(messages::detail(&s, &who, &id).await?))
}

#[utoipa::path(post, path = "/api/v1/messages/{id}/replay", tag = "messages", params(("id" = String, Path, description = "The message", pattern = r"^[^\x00]*$")),
    responses((status = 200, description = "The message, due now (409 unless it was dead or delivered)", body = dto::Message),
        ReplayErrors))]
async fn replay_one(
    State(s): State<ApiState>,
    who: Principal,
    Path(id): Path<MessageId>,
) -> ApiResult<Json<dto::Message>> {
    Ok(Json(messages::replay_one(&s, &who, &id).await?))
}

#[utoipa::path(post, path = "/api/v1/messages/replay", tag = "messages", request_body = BulkReplayBody,
    responses((status = 202, description = "How many dead messages are due again", body = dto::ReplayResult), BodyErrors))]
async fn replay_bulk(
    State(s): State<ApiState>,
    who: Principal,
    body: JsonBody,
) -> ApiResult<(StatusCode, Json<dto::ReplayResult>)> {
    Ok((StatusCode::ACCEPTED, Json(messages::replay_bulk(&s, &who, &body.value).await?)))
}

#[utoipa::path(get, path = "/api/v1/endpoints", tag = "endpoints", params(CustomerPageQuery),
    responses((status = 200, description = "Endpoints (one circuit per target URL), newest first", body = dto::Page<dto::Endpoint>),
        ListErrors))]
async fn list_endpoints(
    State(s): State<ApiState>,
    who: Principal,
    Params(q): Params<CustomerPageQuery>,
) -> ApiResult<Json<dto::Page<dto::Endpoint>>> {
    let page = page_of(q.limit, &q.cursor)?;
    Ok(Json(endpoints::list(&s, &who, text_of(&q.customer_id), page).await?))
}

#[utoipa::path(post, path = "/api/v1/endpoints/{id}/unlock", tag = "endpoints", params(("id" = String, Path, description = "The endpoint", pattern = r"^[^\x00]*$")),
    request_body(content = UnlockBody, description = "Optional: what to do with the held messages (deliver them by default)"),
    responses((status = 200, description = "The endpoint, closed with its counters reset", body = dto::Endpoint), UnlockErrors))]
async fn unlock(
    State(s): State<ApiState>,
    who: Principal,
    Path(id): Path<EndpointId>,
    body: JsonBody,
) -> ApiResult<Json<dto::Endpoint>> {
    who.require_admin()?;
    let UnlockBody(backlog) = UnlockBody::read(&body.value).map_err(ServiceError::from)?;
    Ok(Json(endpoints::unlock(&s, &who, &id, backlog).await?))
}

#[utoipa::path(post, path = "/api/v1/retry-policies/preview", tag = "subscriptions", request_body = PreviewBody,
    responses((status = 200, description = "When each attempt would start if all failed (no jitter)", body = dto::Preview),
        BodyErrors))]
async fn preview(_who: Principal, body: JsonBody) -> ApiResult<Json<dto::Preview>> {
    Ok(Json(policies::preview(&body.value)?))
}
