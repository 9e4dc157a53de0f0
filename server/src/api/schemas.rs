//! What the OpenAPI document says about the query parameters of the lists, and the problem+json
//! answers. (Request bodies are declared with their rules in `domain::request`, events in
//! `domain::event`, retry policies in `domain::policy`.) Every constraint here mirrors a check in
//! the service layer, so that a client generated from the document sends what the server accepts.

use std::borrow::Cow;
use std::collections::BTreeMap;

use domain::states::MessageState;
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{
    AnyOfBuilder, KnownFormat, Object, ObjectBuilder, OneOfBuilder, Schema, SchemaFormat, SchemaType, Type,
};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Required};
use utoipa::{IntoParams, IntoResponses, PartialSchema, ToSchema};

/// Any text without NUL: what ids and filters in a path or query may hold.
const NO_NUL: &str = r"^[^\x00]*$";

fn ty(t: Type, nullable: bool) -> SchemaType {
    if nullable { SchemaType::from_iter([t, Type::Null]) } else { SchemaType::new(t) }
}

fn one_of_enum(values: &[&str], nullable: bool) -> Schema {
    let values = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(values.iter().copied())).build();
    if nullable {
        OneOfBuilder::new().item(values).item(ObjectBuilder::new().schema_type(Type::Null)).build().into()
    } else {
        values.into()
    }
}

fn date_time(nullable: bool, description: &str) -> Object {
    ObjectBuilder::new()
        .schema_type(ty(Type::String, nullable))
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
        .description(Some(description))
        .build()
}

fn reference(name: &str) -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(name))
}

fn names<T>(all: &'static [T], name: fn(&T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(name).collect()
}

// -------------------------------------------------------------------------------------------------
// Query parameters

fn query(name: &str, schema: impl Into<RefOr<Schema>>, description: &str) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Query)
        .required(Required::False)
        .schema(Some(schema))
        .description(Some(description))
        .build()
}

/// An empty value means the parameter is absent (as HTML forms send it).
fn or_empty(schema: impl Into<RefOr<Schema>>) -> Schema {
    let empty = ObjectBuilder::new().schema_type(Type::String).max_length(Some(0));
    AnyOfBuilder::new().item(schema).item(empty).build().into()
}

fn page_params() -> Vec<Parameter> {
    let limit = ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).maximum(Some(1000));
    // Opaque: only `next_cursor` values are valid. Each is base64url without padding of `c1:` and an
    // id, so it starts with `YzE6`; not every string of this pattern is a cursor (422 otherwise).
    let cursor = ObjectBuilder::new().schema_type(Type::String).pattern(Some(r"^YzE6[A-Za-z0-9_-]+$"));
    vec![
        query("limit", or_empty(limit), "Page size, 1 to 1000 (default 50)"),
        query("cursor", or_empty(cursor), "`next_cursor` of the previous page"),
    ]
}

fn id_filter() -> Object {
    ObjectBuilder::new().schema_type(Type::String).pattern(Some(NO_NUL)).build()
}

fn customer_param() -> Parameter {
    query(
        "customer_id",
        id_filter(),
        "With the admin token: the customer to act for (lists: only its objects). Ignored for a customer's key",
    )
}

/// `limit` and `cursor`.
pub struct PageQuery;

impl IntoParams for PageQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        page_params()
    }
}

/// `limit`, `cursor` and the admin's `customer_id`.
pub struct CustomerPageQuery;

impl IntoParams for CustomerPageQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let mut params = page_params();
        params.push(customer_param());
        params
    }
}

/// The admin's `customer_id` (required with the admin token).
pub struct CustomerQuery;

impl IntoParams for CustomerQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![customer_param()]
    }
}

/// The delivery log's filters.
pub struct MessageQuery;

impl IntoParams for MessageQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let state = one_of_enum(&names(MessageState::ALL, MessageState::as_str), false);
        let mut params = page_params();
        params.extend([
            query(
                "event_id",
                id_filter(),
                "Only the messages of the event with this CloudEvent id (the admin names its customer)",
            ),
            query("subscription_id", id_filter(), "Only this subscription's messages"),
            query("state", or_empty(state), "Only messages in this state"),
            query("event_type", id_filter(), "Only events of this type"),
            query("since", or_empty(date_time(false, "RFC 3339")), "Created at or after this RFC 3339 time"),
            query("until", or_empty(date_time(false, "RFC 3339")), "Created before this RFC 3339 time"),
            customer_param(),
        ]);
        params
    }
}

/// The archive's filters.
pub struct EventQuery;

impl IntoParams for EventQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let mut params = page_params();
        params.extend([
            query("source", id_filter(), "Only events of this source"),
            query("type", id_filter(), "Only events of this type"),
            query("since", or_empty(date_time(false, "RFC 3339")), "Published at or after this RFC 3339 time"),
            query("until", or_empty(date_time(false, "RFC 3339")), "Published before this RFC 3339 time"),
            customer_param(),
        ]);
        params
    }
}

/// Which event of an id: its `source` (needed only when two kept events share the id), and the
/// admin's `customer_id`.
pub struct EventKeyQuery;

impl IntoParams for EventKeyQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![query("source", id_filter(), "The event's source, when two kept events share its id"), customer_param()]
    }
}

/// The audit log's filters, `limit`, `cursor` and the admin's `customer_id`.
pub struct AuditQuery;

impl IntoParams for AuditQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let mut params = page_params();
        params.extend([
            query("action", id_filter(), "Only this action, e.g. `subscription.update` or `endpoint.lock`"),
            query("object_id", id_filter(), "Only rows about this object (a subscription, endpoint, key… id)"),
            query("since", or_empty(date_time(false, "RFC 3339")), "At or after this RFC 3339 time"),
            query("until", or_empty(date_time(false, "RFC 3339")), "Before this RFC 3339 time"),
            customer_param(),
        ]);
        params
    }
}

// -------------------------------------------------------------------------------------------------
// Error responses: RFC 9457 problem+json

fn problem(status: u16) -> (String, RefOr<utoipa::openapi::response::Response>) {
    let description = match status {
        400 => {
            "The request is malformed: not JSON, too deeply nested, or a path or query that is not UTF-8 or holds NUL"
        }
        401 => "No valid bearer token",
        403 => "Only the admin token may do this",
        404 => "No such object (another customer's objects answer 404 too)",
        405 => "The route does not take this method",
        409 => "The object's state does not allow this",
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
    if status == 429 || status == 503 {
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
