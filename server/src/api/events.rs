//! Publishing, and the archive of kept events: listing, finding by CloudEvent id, replaying a window.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use domain::dto;
use domain::event::schema::{CloudEventBatch, CloudEventBody};
use domain::query::{CustomerQuery, EventKeyQuery, EventQuery, text_of};
use domain::request::ReplayWindowBody;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::admin::page_of;
use super::extract::{Body, Params, Published};
use super::problem::ApiResult;
use super::rate_limit::PublishPermit;
use super::schemas::{EventReadErrors, ListErrors, PublishErrors, WindowReplayErrors};
use super::state::ApiState;
use crate::service::{Principal, events, replays};
use crate::store::wal_flush::Flushed;

pub fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::default()
        .routes(routes!(publish, list_events))
        // `GET /api/v1/events/replay` is the event whose id is `replay`.
        .routes(routes!(replay_window, event_named_replay))
        .routes(routes!(event_detail))
}

#[utoipa::path(post, path = "/api/v1/events", tag = "events",
    request_body(
        content((CloudEventBody = "application/cloudevents+json"), (CloudEventBatch = "application/cloudevents-batch+json"),
            (CloudEventBody = "application/json")),
        description = "One CloudEvent, or a batch of up to 1000 as application/cloudevents-batch+json (an empty batch stores nothing)"),
    params(CustomerQuery),
    responses((status = 202, description = "Committed; one entry per event, in order (`duplicate` when `(source, id)` was published before)",
        body = dto::PublishResult), PublishErrors))]
async fn publish(
    State(s): State<ApiState>,
    PublishPermit(who): PublishPermit,
    Params(q): Params<CustomerQuery>,
    Published { events, batch }: Published,
) -> ApiResult<(StatusCode, Extension<Flushed>, Json<dto::PublishResult>)> {
    let published = events::publish(&s, &who, text_of(&q.customer_id), events, batch).await?;
    // The intake answers once the batch's commit is flushed: nothing is left to flush.
    Ok((StatusCode::ACCEPTED, Extension(Flushed), Json(published)))
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
    responses((status = 202, description = "The replay job, stored: `done` with its final count (the new messages the \
        window's events got) when the window had at most 500 events, else `running` (follow it at \
        `GET /api/v1/replays/{replay_id}`)", body = dto::ReplayStarted), WindowReplayErrors))]
async fn replay_window(
    State(s): State<ApiState>,
    who: Principal,
    Body(body): Body<ReplayWindowBody>,
) -> ApiResult<(StatusCode, Json<dto::ReplayStarted>)> {
    Ok((StatusCode::ACCEPTED, Json(replays::start_events(&s, &who, body).await?)))
}
