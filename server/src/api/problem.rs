//! The one error type of the HTTP layer: every failure becomes an RFC 9457
//! `application/problem+json` body, with the status decided here and only here.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use domain::errors::FieldError;
use serde::Serialize;

use crate::service::ServiceError;

#[derive(Debug)]
pub enum ApiError {
    Service(ServiceError),
    Unauthorized,
    BadRequest {
        detail: String,
        errors: Vec<FieldError>,
    },
    PayloadTooLarge,
    /// The request line and headers exceed this many bytes.
    HeadersTooLarge(usize),
    UnsupportedMediaType(String),
    NotFound,
    MethodNotAllowed,
    /// Over the publish rate; retry after this many seconds.
    RateLimited(u64),
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Problem {
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        ApiError::Service(e)
    }
}

/// Bad fields of a body or a query, each named.
impl From<Vec<FieldError>> for ApiError {
    fn from(errors: Vec<FieldError>) -> Self {
        ApiError::Service(ServiceError::Invalid(errors))
    }
}

impl ApiError {
    pub fn field(field: &str, message: &str) -> ApiError {
        ApiError::BadRequest { detail: format!("{field}: {message}"), errors: vec![FieldError::new(field, message)] }
    }

    fn parts(self) -> (StatusCode, String, Vec<FieldError>) {
        match self {
            ApiError::Service(ServiceError::NotFound(what)) => {
                (StatusCode::NOT_FOUND, format!("{what} not found"), vec![])
            }
            ApiError::Service(ServiceError::NotFoundField { field, what }) => (
                StatusCode::NOT_FOUND,
                format!("{field}: no such {what}"),
                vec![FieldError::new(field, format!("no such {what}"))],
            ),
            ApiError::Service(ServiceError::Invalid(errors)) => {
                let detail = errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
                (StatusCode::UNPROCESSABLE_ENTITY, detail, errors)
            }
            ApiError::Service(ServiceError::Forbidden) => {
                (StatusCode::FORBIDDEN, "this action needs the admin token".into(), vec![])
            }
            ApiError::Service(ServiceError::ReadOnly) => {
                (StatusCode::FORBIDDEN, "this role can only read; it changes nothing".into(), vec![])
            }
            ApiError::Service(ServiceError::Conflict(detail)) => (StatusCode::CONFLICT, detail, vec![]),
            ApiError::Service(ServiceError::Db(e)) => {
                tracing::error!(error = %e, "database error");
                (StatusCode::SERVICE_UNAVAILABLE, "the database failed this request; try again".into(), vec![])
            }
            // Logged once per outage, by the database's health (not at every request).
            ApiError::Service(ServiceError::Unavailable(_)) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the database is unavailable; try again in {UNAVAILABLE_RETRY_AFTER} s"),
                vec![],
            ),
            ApiError::Service(ServiceError::Unsealable(e)) => {
                tracing::error!(error = %e, "opening a subscription secret failed");
                (StatusCode::INTERNAL_SERVER_ERROR, "a stored secret could not be read".into(), vec![])
            }
            ApiError::Unauthorized => {
                (StatusCode::UNAUTHORIZED, "send a valid token as Authorization: Bearer <token>".into(), vec![])
            }
            ApiError::BadRequest { detail, errors } => (StatusCode::BAD_REQUEST, detail, errors),
            ApiError::PayloadTooLarge => {
                (StatusCode::PAYLOAD_TOO_LARGE, "the request body is too large".into(), vec![])
            }
            ApiError::HeadersTooLarge(max) => (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                format!("the request's target and headers exceed {max} bytes"),
                vec![],
            ),
            ApiError::UnsupportedMediaType(detail) => (StatusCode::UNSUPPORTED_MEDIA_TYPE, detail, vec![]),
            ApiError::NotFound => (StatusCode::NOT_FOUND, "no such route".into(), vec![]),
            ApiError::MethodNotAllowed => {
                (StatusCode::METHOD_NOT_ALLOWED, "this route does not take that method".into(), vec![])
            }
            ApiError::RateLimited(secs) => (
                StatusCode::TOO_MANY_REQUESTS,
                format!("this API key is over its publish rate; retry in {secs} s"),
                vec![],
            ),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry_after = match self {
            ApiError::RateLimited(secs) => Some(secs),
            ApiError::Service(ServiceError::Db(_) | ServiceError::Unavailable(_)) => Some(UNAVAILABLE_RETRY_AFTER),
            _ => None,
        };
        let (status, detail, errors) = self.parts();
        let problem = Problem {
            kind: "about:blank".into(),
            title: status.canonical_reason().unwrap_or("Error").into(),
            status: status.as_u16(),
            detail,
            errors,
        };
        let mut response = (status, axum::Json(problem)).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// Seconds a client is told to wait when the database fails: about how long
/// the database's health takes to notice its return.
pub const UNAVAILABLE_RETRY_AFTER: u64 = 2;
