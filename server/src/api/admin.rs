//! Admin routes: customers, API keys, users, the audit log.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use domain::dto;
use domain::ids::{ApiKeyId, CustomerId};
use domain::query::{AuditQuery, Cursor, Limit, PageQuery, text_of};
use domain::request::{NameBody, PortalLinkBody, UserBody};

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{Admin, Body, Params};
use super::problem::ApiResult;
use super::schemas::{
    AdminCreateErrors, AdminCreateUnderErrors, AdminListErrors, CreateErrors, ListErrors, ReadErrors,
};
use super::state::ApiState;
use crate::config::Settings;
use crate::service::{PageRequest, Principal, ServiceError, audit, customers, page_request, portal, users};

pub fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::default()
        .routes(routes!(create_customer, list_customers))
        .routes(routes!(create_api_key, list_api_keys))
        .routes(routes!(revoke_api_key))
        .routes(routes!(create_portal_link))
        .routes(routes!(create_user))
        .routes(routes!(audit_log))
}

/// The page a list's `limit` and `cursor` ask for.
pub(super) fn page_of(limit: Option<Limit>, cursor: &Option<Cursor>) -> Result<PageRequest, ServiceError> {
    page_request(limit, text_of(cursor))
}

#[utoipa::path(post, path = "/api/v1/customers", request_body = NameBody, tag = "admin",
    responses((status = 201, description = "The new customer", body = dto::Customer), AdminCreateErrors))]
async fn create_customer(
    State(s): State<ApiState>,
    Admin(who): Admin,
    Body(body): Body<NameBody>,
) -> ApiResult<(StatusCode, Json<dto::Customer>)> {
    Ok((StatusCode::CREATED, Json(customers::create(&s, &who, body).await?)))
}

#[utoipa::path(get, path = "/api/v1/customers", tag = "admin", params(PageQuery),
    responses((status = 200, description = "Customers, newest first", body = dto::Page<dto::Customer>), AdminListErrors))]
async fn list_customers(
    State(s): State<ApiState>,
    who: Principal,
    Params(p): Params<PageQuery>,
) -> ApiResult<Json<dto::Page<dto::Customer>>> {
    Ok(Json(customers::list(&s, &who, page_of(p.limit, &p.cursor)?).await?))
}

#[utoipa::path(post, path = "/api/v1/customers/{id}/api-keys", request_body = NameBody, tag = "admin",
    params(("id" = String, Path, description = "The customer", pattern = r"^[^\x00]*$")),
    responses((status = 201, description = "The new key; `token` is shown only here", body = dto::ApiKeyCreated),
        AdminCreateUnderErrors))]
async fn create_api_key(
    State(s): State<ApiState>,
    Admin(who): Admin,
    Path(id): Path<CustomerId>,
    Body(body): Body<NameBody>,
) -> ApiResult<(StatusCode, Json<dto::ApiKeyCreated>)> {
    Ok((StatusCode::CREATED, Json(customers::create_api_key(&s, &who, &id, body).await?)))
}

#[utoipa::path(get, path = "/api/v1/customers/{id}/api-keys", tag = "admin",
    params(("id" = String, Path, description = "The customer", pattern = r"^[^\x00]*$")),
    responses((status = 200, description = "The customer's keys, newest first, without their tokens (the admin, or the customer's own key)",
        body = dto::Page<dto::ApiKey>), ReadErrors))]
async fn list_api_keys(
    State(s): State<ApiState>,
    who: Principal,
    Path(id): Path<CustomerId>,
) -> ApiResult<Json<dto::Page<dto::ApiKey>>> {
    Ok(Json(dto::Page::of(customers::list_api_keys(&s, &who, &id).await?, None)))
}

#[utoipa::path(delete, path = "/api/v1/customers/{id}/api-keys/{key_id}", tag = "admin",
    params(("id" = String, Path, description = "The customer", pattern = r"^[^\x00]*$"),
        ("key_id" = String, Path, description = "The key", pattern = r"^[^\x00]*$")),
    responses((status = 204, description = "Revoked: the key answers 401 from its next request (within a second on every process)"),
        ReadErrors))]
async fn revoke_api_key(
    State(s): State<ApiState>,
    who: Principal,
    Path((id, key_id)): Path<(CustomerId, ApiKeyId)>,
) -> ApiResult<StatusCode> {
    let token_hash = customers::revoke_api_key(&s, &who, &id, &key_id).await?;
    s.keys().forget(&token_hash);
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/api/v1/customers/{id}/portal-links", request_body = PortalLinkBody, tag = "admin",
    params(("id" = String, Path, description = "The customer", pattern = r"^[^\x00]*$")),
    responses((status = 201, description = "A link that opens the dashboard as the customer, without a password (the admin, or \
        the customer's own key). It works once, and not after `expires_at`: a second use, or a use after it, shows the login \
        page. Only a hash of its token is stored (and, for a request with an `Idempotency-Key`, the answer itself, sealed, \
        for 24 h). Its session lasts `ttl_secs` from the first use; a `viewer` sees every page the customer sees and \
        changes nothing.", body = dto::PortalLink), CreateErrors))]
async fn create_portal_link(
    State(s): State<ApiState>,
    who: Principal,
    Path(id): Path<CustomerId>,
    headers: HeaderMap,
    Body(body): Body<PortalLinkBody>,
) -> ApiResult<(StatusCode, Json<dto::PortalLink>)> {
    let base = base_url(&s.settings, &headers);
    Ok((StatusCode::CREATED, Json(portal::create_link(&s, &who, &id, body, &base).await?)))
}

/// Where the dashboard is reached: `public_url`, else the address the request was sent to (https
/// when cookies are marked secure, as they are behind a TLS proxy).
fn base_url(settings: &Settings, headers: &HeaderMap) -> String {
    if let Some(public) = &settings.public_url {
        return public.trim_end_matches('/').to_string();
    }
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or(settings.listen.as_str());
    let scheme = if settings.secure_cookies { "https" } else { "http" };
    format!("{scheme}://{host}")
}

#[utoipa::path(post, path = "/api/v1/users", request_body = UserBody, tag = "admin",
    responses((status = 201, description = "The new dashboard user", body = dto::User), AdminCreateErrors))]
async fn create_user(
    State(s): State<ApiState>,
    Admin(who): Admin,
    Body(body): Body<UserBody>,
) -> ApiResult<(StatusCode, Json<dto::User>)> {
    Ok((StatusCode::CREATED, Json(users::create(&s, &who, body).await?)))
}

#[utoipa::path(get, path = "/api/v1/audit-log", tag = "admin", params(AuditQuery),
    responses((status = 200, description = "Changes, newest first: every row for the admin, a customer's own rows for its key",
        body = dto::Page<dto::AuditEntry>), ListErrors))]
async fn audit_log(
    State(s): State<ApiState>,
    who: Principal,
    Params(q): Params<AuditQuery>,
) -> ApiResult<Json<dto::Page<dto::AuditEntry>>> {
    let page = page_of(q.limit, &q.cursor)?;
    Ok(Json(audit::list(&s, &who, &q, page).await?))
}
