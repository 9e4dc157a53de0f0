//! Replay jobs: how far one got, and its cancel.

use axum::Json;
use axum::extract::{Path, State};
use domain::dto;
use domain::ids::ReplayId;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::problem::ApiResult;
use super::schemas::{ReadErrors, ReplayErrors};
use super::state::ApiState;
use crate::service::{Principal, replays};

pub fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::default().routes(routes!(read, cancel))
}

#[utoipa::path(get, path = "/api/v1/replays/{id}", tag = "messages",
    params(("id" = String, Path, description = "The replay job", pattern = r"^[^\x00]*$")),
    responses((status = 200, description = "The job: its state and what it replayed so far", body = dto::Replay), ReadErrors))]
async fn read(State(s): State<ApiState>, who: Principal, Path(id): Path<ReplayId>) -> ApiResult<Json<dto::Replay>> {
    Ok(Json(replays::get(&s, &who, &id).await?))
}

#[utoipa::path(delete, path = "/api/v1/replays/{id}", tag = "messages",
    params(("id" = String, Path, description = "The replay job", pattern = r"^[^\x00]*$")),
    responses((status = 200, description = "The job, cancelled: what it replayed stays, it replays nothing more \
        (409 once it ended)", body = dto::Replay), ReplayErrors))]
async fn cancel(State(s): State<ApiState>, who: Principal, Path(id): Path<ReplayId>) -> ApiResult<Json<dto::Replay>> {
    Ok(Json(replays::cancel(&s, &who, &id).await?))
}
