//! Endpoints (one circuit per target URL) and their unlock.

use axum::Json;
use axum::extract::{Path, State};
use domain::dto;
use domain::ids::EndpointId;
use domain::query::{CustomerPageQuery, text_of};
use domain::request::UnlockBody;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::admin::page_of;
use super::extract::{Admin, Body, Params};
use super::problem::ApiResult;
use super::schemas::{ListErrors, UnlockErrors};
use super::state::ApiState;
use crate::service::{Principal, endpoints};

pub fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::default().routes(routes!(list_endpoints)).routes(routes!(unlock))
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
    Admin(who): Admin,
    Path(id): Path<EndpointId>,
    Body(UnlockBody(backlog)): Body<UnlockBody>,
) -> ApiResult<Json<dto::Endpoint>> {
    Ok(Json(endpoints::unlock(&s, &who, &id, backlog).await?))
}
