//! The event-type catalog: a customer's types, their schemas and examples.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use domain::dto;
use domain::query::{CustomerPageQuery, CustomerQuery, text_of};
use domain::request::{EventTypeBody, EventTypePatch};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::admin::page_of;
use super::extract::{Body, Params};
use super::problem::ApiResult;
use super::schemas::{ListErrors, NamedCreateErrors, NamedReadErrors, NamedUpdateErrors};
use super::state::ApiState;
use crate::service::{Principal, event_types};

pub fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::default().routes(routes!(create, list)).routes(routes!(read, update, remove))
}

#[utoipa::path(post, path = "/api/v1/event-types", request_body = EventTypeBody, tag = "event-types",
    responses((status = 201, description = "The new type", body = dto::EventType), NamedCreateErrors))]
async fn create(
    State(s): State<ApiState>,
    who: Principal,
    Body(body): Body<EventTypeBody>,
) -> ApiResult<(StatusCode, Json<dto::EventType>)> {
    Ok((StatusCode::CREATED, Json(event_types::create(&s, &who, body).await?)))
}

#[utoipa::path(get, path = "/api/v1/event-types", tag = "event-types", params(CustomerPageQuery),
    responses((status = 200, description = "The catalog, newest first (every customer's for the admin without `customer_id`)",
        body = dto::Page<dto::EventType>), ListErrors))]
async fn list(
    State(s): State<ApiState>,
    who: Principal,
    Params(q): Params<CustomerPageQuery>,
) -> ApiResult<Json<dto::Page<dto::EventType>>> {
    Ok(Json(event_types::list(&s, &who, text_of(&q.customer_id), page_of(q.limit, &q.cursor)?).await?))
}

#[utoipa::path(get, path = "/api/v1/event-types/{name}", tag = "event-types",
    params(("name" = String, Path, description = "The type's name", pattern = r"^[^\x00]*$"), CustomerQuery),
    responses((status = 200, description = "The type", body = dto::EventType), NamedReadErrors))]
async fn read(
    State(s): State<ApiState>,
    who: Principal,
    Path(name): Path<String>,
    Params(q): Params<CustomerQuery>,
) -> ApiResult<Json<dto::EventType>> {
    Ok(Json(event_types::get(&s, &who, text_of(&q.customer_id), &name).await?))
}

#[utoipa::path(patch, path = "/api/v1/event-types/{name}", tag = "event-types",
    request_body(content = ref("#/components/schemas/EventTypePatch"),
        description = "The fields to change; an empty body changes nothing", content_type = "application/json"),
    params(("name" = String, Path, description = "The type's name", pattern = r"^[^\x00]*$"), CustomerQuery),
    responses((status = 200, description = "The changed type", body = dto::EventType), NamedUpdateErrors))]
async fn update(
    State(s): State<ApiState>,
    who: Principal,
    Path(name): Path<String>,
    Params(q): Params<CustomerQuery>,
    Body(patch): Body<EventTypePatch>,
) -> ApiResult<Json<dto::EventType>> {
    Ok(Json(event_types::update(&s, &who, text_of(&q.customer_id), &name, patch).await?))
}

#[utoipa::path(delete, path = "/api/v1/event-types/{name}", tag = "event-types",
    params(("name" = String, Path, description = "The type's name", pattern = r"^[^\x00]*$"), CustomerQuery),
    responses((status = 204, description = "Removed from the catalog; events of the type publish unchecked"),
        NamedReadErrors))]
async fn remove(
    State(s): State<ApiState>,
    who: Principal,
    Path(name): Path<String>,
    Params(q): Params<CustomerQuery>,
) -> ApiResult<StatusCode> {
    event_types::delete(&s, &who, text_of(&q.customer_id), &name).await?;
    Ok(StatusCode::NO_CONTENT)
}
