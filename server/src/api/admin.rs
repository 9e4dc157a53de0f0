//! Admin routes: customers, API keys, users, the audit log.

use app::domain::dto;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use super::extract::{JsonBody, Params};
use super::problem::ApiResult;
use super::schemas::{AdminCreateErrors, AdminCreateUnderErrors, AdminListErrors, NameBody, PageQuery, UserBody};
use super::state::ApiState;
use crate::service::{self, Principal, customers, page_request};

pub fn router() -> Router<ApiState> {
    Router::new()
        .route("/api/v1/customers", post(create_customer).get(list_customers))
        .route("/api/v1/customers/{id}/api-keys", post(create_api_key))
        .route("/api/v1/users", post(create_user))
        .route("/api/v1/audit-log", get(audit_log))
}

#[derive(Deserialize, Default)]
pub struct PageParams {
    pub limit: Option<String>,
    pub cursor: Option<String>,
}

impl PageParams {
    pub fn page(&self) -> Result<service::PageRequest, service::ServiceError> {
        let limit = match self.limit.as_deref() {
            None | Some("") => None,
            Some(text) => {
                Some(text.parse::<i64>().map_err(|_| service::ServiceError::field("limit", "must be from 1 to 1000"))?)
            }
        };
        page_request(limit, self.cursor.as_deref())
    }
}

#[utoipa::path(post, path = "/api/v1/customers", request_body = NameBody, tag = "admin",
    responses((status = 201, description = "The new customer", body = dto::Customer), AdminCreateErrors))]
async fn create_customer(
    State(s): State<ApiState>,
    who: Principal,
    body: JsonBody,
) -> ApiResult<(StatusCode, Json<dto::Customer>)> {
    Ok((StatusCode::CREATED, Json(customers::create(&s, &who, &body.value).await?)))
}

#[utoipa::path(get, path = "/api/v1/customers", tag = "admin", params(PageQuery),
    responses((status = 200, description = "Customers, newest first", body = dto::Page<dto::Customer>), AdminListErrors))]
async fn list_customers(
    State(s): State<ApiState>,
    who: Principal,
    Params(p): Params<PageParams>,
) -> ApiResult<Json<dto::Page<dto::Customer>>> {
    Ok(Json(customers::list(&s, &who, p.page()?).await?))
}

#[utoipa::path(post, path = "/api/v1/customers/{id}/api-keys", request_body = NameBody, tag = "admin",
    params(("id" = String, Path, description = "The customer", pattern = r"^[^\x00]*$")),
    responses((status = 201, description = "The new key; `token` is shown only here", body = dto::ApiKeyCreated),
        AdminCreateUnderErrors))]
async fn create_api_key(
    State(s): State<ApiState>,
    who: Principal,
    Path(id): Path<String>,
    body: JsonBody,
) -> ApiResult<(StatusCode, Json<dto::ApiKeyCreated>)> {
    Ok((StatusCode::CREATED, Json(customers::create_api_key(&s, &who, &id, &body.value).await?)))
}

#[utoipa::path(post, path = "/api/v1/users", request_body = UserBody, tag = "admin",
    responses((status = 201, description = "The new dashboard user", body = dto::User), AdminCreateErrors))]
async fn create_user(
    State(s): State<ApiState>,
    who: Principal,
    body: JsonBody,
) -> ApiResult<(StatusCode, Json<dto::User>)> {
    Ok((StatusCode::CREATED, Json(customers::create_user(&s, &who, &body.value).await?)))
}

#[utoipa::path(get, path = "/api/v1/audit-log", tag = "admin", params(PageQuery),
    responses((status = 200, description = "Admin actions, newest first", body = dto::Page<dto::AuditEntry>), AdminListErrors))]
async fn audit_log(
    State(s): State<ApiState>,
    who: Principal,
    Params(p): Params<PageParams>,
) -> ApiResult<Json<dto::Page<dto::AuditEntry>>> {
    Ok(Json(customers::audit_log(&s, &who, p.page()?).await?))
}
