//! Query parameters, each set declared once: its parameters and each one's
//! rule, a type that both reads the text and describes it in the OpenAPI
//! document (feature `openapi`). The API and the dashboard's filters read a
//! query with the same declaration. An empty value counts as absent (HTML forms
//! send empty fields); unknown parameters are ignored; a bad one is named, all
//! at once.

use serde_json::Value;

use crate::errors::FieldError;
use crate::request::{FieldRule, Time};
use crate::states::MessageState;

/// How one parameter's non-empty value is read and described.
pub trait ParamRule: Sized {
    /// What the parameter means when its declaration says nothing else.
    const DESCRIPTION: &'static str = "";

    /// Reads the value of the parameter named `name`.
    fn read(text: &str, name: &str) -> Result<Self, FieldError>;

    /// The parameter's schema.
    #[cfg(feature = "openapi")]
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>;
}

/// Any text: an id, a type or a source to match exactly. (A NUL never gets this far: a
/// request target that holds one is refused whole.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter(pub String);

impl ParamRule for Filter {
    fn read(text: &str, _name: &str) -> Result<Self, FieldError> {
        Ok(Filter(text.to_string()))
    }

    #[cfg(feature = "openapi")]
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        openapi::text().into()
    }
}

/// With the admin token, the customer to act for (lists: only its objects); ignored for a
/// customer's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActingFor(pub String);

impl ParamRule for ActingFor {
    const DESCRIPTION: &'static str =
        "With the admin token: the customer to act for (lists: only its objects). Ignored for a customer's key";

    fn read(text: &str, _name: &str) -> Result<Self, FieldError> {
        Ok(ActingFor(text.to_string()))
    }

    #[cfg(feature = "openapi")]
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        openapi::text().into()
    }
}

/// A body field's rule read from a parameter's text, its first error the parameter's.
fn as_field<R: FieldRule>(text: &str, name: &str) -> Result<R, FieldError> {
    R::read(&Value::String(text.to_string()), name).map_err(|mut errors| errors.remove(0))
}

/// An RFC 3339 time, as unix milliseconds: a body's [`Time`], read from a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeParam(pub i64);

impl ParamRule for TimeParam {
    fn read(text: &str, name: &str) -> Result<Self, FieldError> {
        as_field::<Time>(text, name).map(|time| TimeParam(time.ms))
    }

    #[cfg(feature = "openapi")]
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        let time = ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some("RFC 3339"));
        openapi::or_empty(time)
    }
}

impl ParamRule for MessageState {
    fn read(text: &str, name: &str) -> Result<Self, FieldError> {
        as_field(text, name)
    }

    #[cfg(feature = "openapi")]
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        openapi::or_empty(<MessageState as FieldRule>::schema(false))
    }
}

/// The page size when a list names none.
pub const DEFAULT_LIMIT: u64 = 50;
/// The largest page a list returns.
pub const MAX_LIMIT: u64 = 1000;

/// A page size, 1 to [`MAX_LIMIT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit(pub u64);

impl ParamRule for Limit {
    const DESCRIPTION: &'static str = "Page size, 1 to 1000 (default 50)";

    fn read(text: &str, name: &str) -> Result<Self, FieldError> {
        match text.parse::<u64>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(Limit(n)),
            _ => Err(FieldError::new(name, "must be from 1 to 1000")),
        }
    }

    #[cfg(feature = "openapi")]
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        openapi::or_empty(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).maximum(Some(MAX_LIMIT)))
    }
}

/// Where the next page starts: the `next_cursor` of the previous one, opaque to clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor(pub String);

impl ParamRule for Cursor {
    const DESCRIPTION: &'static str = "`next_cursor` of the previous page";

    fn read(text: &str, _name: &str) -> Result<Self, FieldError> {
        Ok(Cursor(text.to_string()))
    }

    #[cfg(feature = "openapi")]
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        // Only `next_cursor` values are valid. Each is base64url without padding of `c1:` and an
        // id, so it starts with `YzE6`; not every string of this pattern is a cursor (422 otherwise).
        openapi::or_empty(ObjectBuilder::new().schema_type(Type::String).pattern(Some(r"^YzE6[A-Za-z0-9_-]+$")))
    }
}

/// A set of query parameters, read from the query's pairs.
pub trait ReadQuery: Sized {
    /// Reads the parameters, or an error for each bad one.
    fn read(pairs: &[(String, String)]) -> Result<Self, Vec<FieldError>>;
}

macro_rules! text_param {
    ($($name:ident),+) => {$(
        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    )+};
}

text_param!(Filter, ActingFor, Cursor);

/// The text of an optional text parameter.
pub fn text_of<T: AsRef<str>>(param: &Option<T>) -> Option<&str> {
    param.as_ref().map(AsRef::as_ref)
}

/// A query's parameters as `(name, value)` pairs, percent-decoded.
pub fn pairs(query: Option<&str>) -> Vec<(String, String)> {
    url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()).into_owned().collect()
}

/// Declares a set of query parameters: a struct of them, each an `Option` of its rule's type,
/// `read` from the query's pairs, and (feature `openapi`) `utoipa::IntoParams`. A parameter's
/// description is its doc comment, else its rule's; `name as "wire"` names a parameter whose
/// name is a Rust keyword.
macro_rules! request_query {
    ($(#[$meta:meta])* $name:ident {
        $($(#[doc = $doc:literal])* $field:ident $(as $wire:literal)?: $rule:ty),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct $name { $($(#[doc = $doc])* pub $field: Option<$rule>),+ }

        impl ReadQuery for $name {
            fn read(pairs: &[(String, String)]) -> Result<$name, Vec<FieldError>> {
                let mut query = $name::default();
                let mut errors = Vec::new();
                for (key, value) in pairs.iter().filter(|(_, value)| !value.is_empty()) {
                    $(if key == request_query!(@wire $field $($wire)?) {
                        match <$rule as ParamRule>::read(value, key) {
                            Ok(read) => query.$field = Some(read),
                            Err(error) => errors.push(error),
                        }
                        continue;
                    })+
                }
                if errors.is_empty() { Ok(query) } else { Err(errors) }
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::IntoParams for $name {
            fn into_params(
                _: impl Fn() -> Option<utoipa::openapi::path::ParameterIn>,
            ) -> Vec<utoipa::openapi::path::Parameter> {
                vec![$(openapi::parameter(
                    request_query!(@wire $field $($wire)?),
                    <$rule as ParamRule>::schema(),
                    &[$($doc),*],
                    <$rule as ParamRule>::DESCRIPTION,
                )),+]
            }
        }
    };
    (@wire $field:ident) => { stringify!($field) };
    (@wire $field:ident $wire:literal) => { $wire };
}

request_query! {
    /// `limit` and `cursor`.
    PageQuery { limit: Limit, cursor: Cursor }
}

request_query! {
    /// `limit`, `cursor` and the admin's `customer_id`.
    CustomerPageQuery { limit: Limit, cursor: Cursor, customer_id: ActingFor }
}

request_query! {
    /// The admin's `customer_id` (required with the admin token).
    CustomerQuery { customer_id: ActingFor }
}

request_query! {
    /// The delivery log's filters.
    MessageQuery {
        limit: Limit,
        cursor: Cursor,
        /// Only the messages of the event with this CloudEvent id (the admin names its customer)
        event_id: Filter,
        /// Only this subscription's messages
        subscription_id: Filter,
        /// Only messages in this state
        state: MessageState,
        /// Only events of this type
        event_type: Filter,
        /// Created at or after this RFC 3339 time
        since: TimeParam,
        /// Created before this RFC 3339 time
        until: TimeParam,
        customer_id: ActingFor,
    }
}

request_query! {
    /// The archive's filters.
    EventQuery {
        limit: Limit,
        cursor: Cursor,
        /// Only events of this source
        source: Filter,
        /// Only events of this type
        event_type as "type": Filter,
        /// Published at or after this RFC 3339 time
        since: TimeParam,
        /// Published before this RFC 3339 time
        until: TimeParam,
        customer_id: ActingFor,
    }
}

request_query! {
    /// Which event of an id: its `source` (needed only when two kept events share the id), and the
    /// admin's `customer_id`.
    EventKeyQuery {
        /// The event's source, when two kept events share its id
        source: Filter,
        customer_id: ActingFor,
    }
}

request_query! {
    /// The audit log's filters, `limit`, `cursor` and the admin's `customer_id`.
    AuditQuery {
        limit: Limit,
        cursor: Cursor,
        /// Only this action, e.g. `subscription.update` or `endpoint.lock`
        action: Filter,
        /// Only rows about this object (a subscription, endpoint, key… id)
        object_id: Filter,
        /// At or after this RFC 3339 time
        since: TimeParam,
        /// Before this RFC 3339 time
        until: TimeParam,
        customer_id: ActingFor,
    }
}

#[cfg(feature = "openapi")]
pub mod openapi {
    use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
    use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, Schema, Type};
    use utoipa::openapi::{RefOr, Required};

    /// Any text without NUL.
    pub fn text() -> ObjectBuilder {
        ObjectBuilder::new().schema_type(Type::String).pattern(Some(r"^[^\x00]*$"))
    }

    /// The schema, or an empty value, which means the parameter is absent.
    pub fn or_empty(schema: impl Into<RefOr<Schema>>) -> RefOr<Schema> {
        let empty = ObjectBuilder::new().schema_type(Type::String).max_length(Some(0));
        AnyOfBuilder::new().item(schema).item(empty).into()
    }

    /// An optional query parameter, described by its doc comment's lines, else by `otherwise`.
    pub fn parameter(name: &str, schema: RefOr<Schema>, doc: &[&str], otherwise: &str) -> Parameter {
        let doc = crate::request::openapi::doc_text(doc);
        ParameterBuilder::new()
            .name(name)
            .parameter_in(ParameterIn::Query)
            .required(Required::False)
            .schema(Some(schema))
            .description(Some(if doc.is_empty() { otherwise.to_string() } else { doc }))
            .build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(text: &str) -> Vec<(String, String)> {
        pairs(Some(text))
    }

    #[test]
    fn a_query_reads_its_parameters_and_names_every_bad_one() {
        let read = MessageQuery::read(&query("state=dead&since=2026-01-31T12%3A00%3A00Z&limit=&colour=red")).unwrap();
        assert_eq!(read.state, Some(MessageState::Dead));
        assert_eq!(read.since, Some(TimeParam(1_769_860_800_000)));
        assert_eq!((read.limit, read.until), (None, None), "an empty value is absent; others are ignored");
        let bad = MessageQuery::read(&query("state=open&until=yesterday&limit=0")).unwrap_err();
        let named: Vec<&str> = bad.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(named, ["state", "until", "limit"]);
        let events = EventQuery::read(&query("type=order.created&source=%2Fshop")).unwrap();
        assert_eq!(events.event_type, Some(Filter("order.created".into())), "`type` is read into event_type");
        assert_eq!(events.source, Some(Filter("/shop".into())));
        assert_eq!(PageQuery::read(&query("limit=1001")).unwrap_err()[0].message, "must be from 1 to 1000");
    }

    #[cfg(feature = "openapi")]
    #[test]
    fn a_query_describes_its_parameters_in_order() {
        use utoipa::IntoParams;
        let params = EventQuery::into_params(|| None);
        let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["limit", "cursor", "source", "type", "since", "until", "customer_id"]);
        let described = |name: &str| params.iter().find(|p| p.name == name).and_then(|p| p.description.clone());
        assert_eq!(described("limit").as_deref(), Some(Limit::DESCRIPTION), "the rule's own description");
        assert_eq!(described("type").as_deref(), Some("Only events of this type"), "the declaration's");
    }
}
