//! The delivery log: messages with their attempts, and their replay.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use domain::dto;
use domain::ids::MessageId;
use domain::query::MessageQuery;
use domain::request::BulkReplayBody;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::admin::page_of;
use super::extract::{Body, Params};
use super::problem::ApiResult;
use super::schemas::{BodyErrors, ListErrors, ReadErrors, ReplayErrors};
use super::state::ApiState;
use crate::service::{Principal, messages, replays};

pub fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::default()
        .routes(routes!(list_messages))
        .routes(routes!(replay_bulk))
        .routes(routes!(message_detail))
        .routes(routes!(replay_one))
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
    responses((status = 202, description = "The replay job, stored: `done` with its final count when it had at most 500 \
        dead messages, else `running` (follow it at `GET /api/v1/replays/{replay_id}`)", body = dto::ReplayStarted), BodyErrors))]
async fn replay_bulk(
    State(s): State<ApiState>,
    who: Principal,
    Body(body): Body<BulkReplayBody>,
) -> ApiResult<(StatusCode, Json<dto::ReplayStarted>)> {
    Ok((StatusCode::ACCEPTED, Json(replays::start_messages(&s, &who, body).await?)))
}
