//! What the OpenAPI document says about the problem+json answers and the health check. (Request
//! bodies are declared with their rules in `domain::request`, query parameters in
//! `domain::query`, events in `domain::event`, retry policies in `domain::policy`.)

use std::borrow::Cow;
use std::collections::BTreeMap;

use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::{ContentBuilder, Ref, RefOr};
use utoipa::{IntoResponses, PartialSchema, ToSchema};

fn reference(name: &str) -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(name))
}

// -------------------------------------------------------------------------------------------------
// Error responses: RFC 9457 problem+json

pub(super) fn problem(status: u16) -> (String, RefOr<utoipa::openapi::response::Response>) {
    let description = match status {
        400 => {
            "The request is malformed: not JSON, too deeply nested, a path or query that is not UTF-8 or holds NUL, \
             or an `Idempotency-Key` that is not 1 to 255 visible ASCII characters"
        }
        401 => "No valid bearer token",
        403 => "Only the admin token may do this",
        404 => "No such object (another customer's objects answer 404 too)",
        405 => "The route does not take this method",
        409 => {
            "The object's state does not allow this, or the first request with this `Idempotency-Key` is still \
             running (retry after `Retry-After` seconds)"
        }
        413 => "The body is too large",
        415 => "The body is not JSON",
        422 => "Validation failed: `errors` names every bad field",
        429 => "This API key is over its publish rate: retry after `Retry-After` seconds",
        431 => "The request target and headers are too large",
        500 => "A stored secret could not be read",
        503 => "The database is unavailable (or failed this request): retry after `Retry-After` seconds",
        _ => "Error",
    };
    let content = ContentBuilder::new().schema(Some(reference("Problem"))).build();
    let mut response = ResponseBuilder::new().description(description).content("application/problem+json", content);
    if matches!(status, 409 | 429 | 503) {
        let seconds = utoipa::openapi::header::HeaderBuilder::new()
            .schema(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)))
            .description(Some("Seconds to wait"))
            .build();
        response = response.header("Retry-After", seconds);
    }
    (status.to_string(), response.build().into())
}

/// Declares a set of problem responses for `responses(...)`.
macro_rules! problems {
    ($($(#[$meta:meta])* $name:ident = [$($status:literal),+];)+) => {$(
        $(#[$meta])*
        pub struct $name;
        impl IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::response::Response>> {
                [$($status),+].into_iter().map(problem).collect()
            }
        }
    )+};
}

// Every API route may answer 400 (a path or query with NUL or invalid UTF-8), 401, 431 and 503.
problems! {
    /// An admin-only list.
    AdminListErrors = [400, 401, 403, 422, 431, 503];
    /// An admin-only create with a JSON body.
    AdminCreateErrors = [400, 401, 403, 413, 415, 422, 431, 503];
    /// An admin-only create under a parent object.
    AdminCreateUnderErrors = [400, 401, 403, 404, 413, 415, 422, 431, 503];
    /// A customer-scoped list.
    ListErrors = [400, 401, 422, 431, 503];
    /// One object by id.
    ReadErrors = [400, 401, 404, 431, 503];
    /// One object by id, with its signing secret.
    SecretReadErrors = [400, 401, 404, 431, 500, 503];
    /// A change with a JSON body to one object by id, answering it with its secret.
    UpdateErrors = [400, 401, 404, 413, 415, 422, 431, 500, 503];
    /// A customer-scoped create with a JSON body (404: the admin named no such customer).
    CreateErrors = [400, 401, 404, 413, 415, 422, 431, 503];
    /// A customer-scoped create of a named object (409: the name is taken).
    NamedCreateErrors = [400, 401, 404, 409, 413, 415, 422, 431, 503];
    /// One object by name, of a customer the admin names (422: the admin named no customer).
    NamedReadErrors = [400, 401, 404, 422, 431, 503];
    /// A change with a JSON body to one object by name.
    NamedUpdateErrors = [400, 401, 404, 413, 415, 422, 431, 503];
    /// Publishing one subscription's example (409: the type has no example).
    SendExampleErrors = [400, 401, 404, 409, 413, 415, 422, 431, 503];
    /// A request with a JSON body that only validates.
    BodyErrors = [400, 401, 413, 415, 422, 431, 503];
    /// Replaying a window of the archive (404: no such subscription, named in `errors`).
    WindowReplayErrors = [400, 401, 404, 413, 415, 422, 431, 503];
    /// Replaying one message.
    ReplayErrors = [400, 401, 404, 409, 431, 503];
    /// One event by its CloudEvent id (409: more than one kept event has the id and no `source`
    /// says which; 422: the admin named no customer).
    EventReadErrors = [400, 401, 404, 409, 422, 431, 503];
    /// Unlocking an endpoint.
    UnlockErrors = [400, 401, 403, 404, 409, 413, 415, 422, 431, 503];
    /// Publishing.
    PublishErrors = [400, 401, 404, 409, 413, 415, 422, 429, 431, 503];
    /// Open routes: only the request guard answers errors.
    OpenErrors = [400, 431];
}

/// What `/healthz` answers: `status` (`ok` or `database unavailable`), the
/// `database` it checked, and the `error` when it does not answer.
pub struct Health;

impl PartialSchema for Health {
    fn schema() -> RefOr<Schema> {
        let text = |description: &str| ObjectBuilder::new().schema_type(Type::String).description(Some(description));
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("status", text("`ok` or `database unavailable`"))
            .property(
                "database",
                text("The database, without credentials: `PostgreSQL at host:port/name` or `SQLite file`"),
            )
            .property("error", text("Why the database is unavailable (only then)"))
            .required("status")
            .required("database")
            .into()
    }
}

impl ToSchema for Health {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Health")
    }
}
