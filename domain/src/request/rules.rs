//! The rules a request body's fields are read by: each a type that reads one
//! JSON value, names the field in its errors, and describes itself in the
//! OpenAPI document. A rule that reads a form's text too says how.

use serde_json::Value;

use crate::errors::FieldError;
use crate::event::{CloudEvent, MAX_ATTRIBUTE_LEN};
use crate::ids::{CustomerId, SubscriptionId};
use crate::input::{Fields, check_text, whole_number};
use crate::operational::{RESERVED_PREFIX, is_herald_type};
use crate::policy::RetryPolicy;
use crate::states::{ContentMode, MessageState, Role, SignatureScheme, SubscriptionStatus};
use crate::target::TargetUrl;

#[cfg(feature = "openapi")]
use super::openapi;

/// How one field's present, non-null value is read and described.
pub trait FieldRule: Sized {
    /// Reads the value of the field named `name` (the path as the client spelled it).
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>>;

    /// The value a form's text stands for: the text itself, unless the rule reads a number, a
    /// list or a document, which a form can only send as text.
    fn form_value(text: &str) -> Value {
        Value::String(text.to_string())
    }

    /// The field's schema; `nullable` for an optional field, which may be `null`.
    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>;
}

/// Text a person can read and the database can store: 1 to `MAX` characters,
/// not blank, no NUL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text<const MAX: usize>(pub String);

/// The pattern of [`Text`]: not blank, no NUL.
pub const TEXT_PATTERN: &str = r"^[^\x00]*[^\s\x00][^\x00]*$";

impl<const MAX: usize> FieldRule for Text<MAX> {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        let Value::String(text) = value else { return Err(vec![FieldError::new(name, "must be a string")]) };
        check_text(text, MAX).map(|()| Text(text.clone())).map_err(|message| vec![FieldError::new(name, message)])
    }

    /// A form's blank field is `null`: nothing, or, where `null` clears a field, no text.
    fn form_value(text: &str) -> Value {
        blank_is_null(text)
    }

    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        text_schema(nullable, MAX)
    }
}

fn blank_is_null(text: &str) -> Value {
    if text.trim().is_empty() { Value::Null } else { Value::String(text.to_string()) }
}

/// The schema of text that is not blank and holds no NUL, of 1 to `max` characters.
#[cfg(feature = "openapi")]
fn text_schema(nullable: bool, max: usize) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    openapi::object_of(utoipa::openapi::schema::Type::String, nullable)
        .min_length(Some(1))
        .max_length(Some(max))
        .pattern(Some(TEXT_PATTERN))
        .into()
}

/// A whole number from `MIN` to `MAX` (`42`, `42.0` and `4.2e1` alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Integer<const MIN: i64, const MAX: i64>(pub i64);

impl<const MIN: i64, const MAX: i64> FieldRule for Integer<MIN, MAX> {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        match whole_number(value).filter(|n| (MIN..=MAX).contains(n)) {
            Some(n) => Ok(Integer(n)),
            None => Err(vec![FieldError::new(name, format!("must be an integer from {MIN} to {MAX}"))]),
        }
    }

    /// A blank field is `null`: nothing, or, where `null` clears the field, no number.
    fn form_value(text: &str) -> Value {
        if text.trim().is_empty() {
            return Value::Null;
        }
        text.trim().parse::<i64>().map(Value::from).unwrap_or_else(|_| Value::String(text.to_string()))
    }

    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        openapi::object_of(utoipa::openapi::schema::Type::Integer, nullable)
            .minimum(Some(MIN as f64))
            .maximum(Some(MAX as f64))
            .into()
    }
}

/// The most event types a subscription or a replay names.
pub const MAX_EVENT_TYPES: usize = 100;

/// 1 to [`MAX_EVENT_TYPES`] event types, each a [`Text`] of up to 200 characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTypes(pub Vec<String>);

impl FieldRule for EventTypes {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        let items = match value {
            Value::Array(items) if !items.is_empty() && items.len() <= MAX_EVENT_TYPES => items,
            _ => return Err(vec![FieldError::new(name, "must be a list of 1 to 100 event types (or [\"*\"])")]),
        };
        let mut types = Vec::with_capacity(items.len());
        let mut errors = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match Text::<200>::read(item, &format!("{name}[{i}]")) {
                Ok(Text(event_type)) => types.push(event_type),
                Err(bad) => errors.extend(bad),
            }
        }
        types.dedup();
        if errors.is_empty() { Ok(EventTypes(types)) } else { Err(errors) }
    }

    /// Types typed into one field, separated by commas, spaces or lines.
    fn form_value(text: &str) -> Value {
        text.split([',', ' ', '\n']).map(str::trim).filter(|t| !t.is_empty()).map(Value::from).collect()
    }

    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ArrayBuilder, SchemaType, Type};
        let types =
            if nullable { SchemaType::from_iter([Type::Array, Type::Null]) } else { SchemaType::new(Type::Array) };
        ArrayBuilder::new()
            .schema_type(types)
            .items(Text::<200>::schema(false))
            .min_items(Some(1))
            .max_items(Some(MAX_EVENT_TYPES))
            .into()
    }
}

/// The longest filter, in bytes.
pub const MAX_FILTER_BYTES: usize = 4096;

/// A subscription's filter as written: a CEL expression of 1 to [`MAX_FILTER_BYTES`] bytes over the
/// event, `message`. Whether it parses and gives a boolean is checked where it is compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterText(pub String);

impl FieldRule for FilterText {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        let why = match value {
            Value::String(text) if text.len() > MAX_FILTER_BYTES => format!("must be at most {MAX_FILTER_BYTES} bytes"),
            Value::String(text) if text.trim().is_empty() => "must not be blank (null removes the filter)".into(),
            Value::String(text) if text.contains('\0') => "must not contain NUL".into(),
            Value::String(text) => return Ok(FilterText(text.clone())),
            _ => "must be a CEL expression as a string".into(),
        };
        Err(vec![FieldError::new(name, why)])
    }

    /// A form's empty filter field removes the filter.
    fn form_value(text: &str) -> Value {
        blank_is_null(text)
    }

    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        text_schema(nullable, MAX_FILTER_BYTES)
    }
}

/// A CloudEvent inside a body, its errors named below the field (`event.id`).
impl FieldRule for CloudEvent {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        CloudEvent::parse(value.clone(), name)
    }

    #[cfg(feature = "openapi")]
    fn schema(_nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::Ref::from_schema_name("CloudEventBody").into()
    }
}

/// A CloudEvents type for the catalog: 1 to 1024 bytes without control characters, and not one of
/// Herald's own (`herald.`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTypeName(pub String);

impl FieldRule for EventTypeName {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        let why = match value {
            Value::String(text) if text.is_empty() => "must not be empty".to_string(),
            Value::String(text) if text.len() > MAX_ATTRIBUTE_LEN => {
                format!("must be at most {MAX_ATTRIBUTE_LEN} bytes")
            }
            Value::String(text) if text.chars().any(char::is_control) => "must not contain control characters".into(),
            Value::String(text) if is_herald_type(text) => {
                format!(
                    "the prefix {RESERVED_PREFIX:?} is reserved for Herald's own events, which are documented, not stored"
                )
            }
            Value::String(text) => return Ok(EventTypeName(text.clone())),
            _ => "must be a string".into(),
        };
        Err(vec![FieldError::new(name, why)])
    }

    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        openapi::object_of(utoipa::openapi::schema::Type::String, nullable)
            .min_length(Some(1))
            .max_length(Some(MAX_ATTRIBUTE_LEN))
            .pattern(Some(r"^[^\x00-\x1f\x7f-\x9f]+$"))
            .into()
    }
}

/// A JSON Schema document: an object or a boolean. Whether it is valid JSON Schema is checked where
/// it is compiled. A form sends it as JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonSchemaDocument(pub Value);

impl FieldRule for JsonSchemaDocument {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        match value {
            Value::Object(_) | Value::Bool(_) => Ok(JsonSchemaDocument(value.clone())),
            _ => Err(vec![FieldError::new(name, "must be a JSON Schema (draft 2020-12): an object or a boolean")]),
        }
    }

    fn form_value(text: &str) -> Value {
        json_text(text)
    }

    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{SchemaType, Type};
        let types =
            if nullable { vec![Type::Object, Type::Boolean, Type::Null] } else { vec![Type::Object, Type::Boolean] };
        utoipa::openapi::ObjectBuilder::new().schema_type(SchemaType::from_iter(types)).into()
    }
}

/// Any JSON value but `null` (which clears the field). A form sends it as JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct AnyJson(pub Value);

impl FieldRule for AnyJson {
    fn read(value: &Value, _name: &str) -> Result<Self, Vec<FieldError>> {
        Ok(AnyJson(value.clone()))
    }

    fn form_value(text: &str) -> Value {
        json_text(text)
    }

    #[cfg(feature = "openapi")]
    fn schema(_nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new().schema_type(utoipa::openapi::schema::SchemaType::AnyValue).into()
    }
}

/// A form's JSON text: empty is `null` (nothing), and text that is not JSON stays text, which the
/// rule then refuses or keeps as a string.
fn json_text(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Null;
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// A receiver's URL: at most 2048 characters, absolute http(s), no credentials (see [`TargetUrl`]).
/// Whether a private address is allowed is the server's setting, checked by the use case.
impl FieldRule for TargetUrl {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        let Text::<2048>(raw) = Text::read(value, name)?;
        TargetUrl::parse(&raw, name).map_err(|e| vec![e])
    }

    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        // What the server accepts is any absolute http(s) URL without credentials or whitespace (and,
        // unless private targets are allowed, no private, loopback or link-local IP literal). This
        // pattern is the part of it a client can check alone: host names, an optional port, then a
        // path, query and fragment of the characters a URL keeps as they are (RFC 3986's, less the
        // few the server would percent-encode and so lengthen).
        const URL: &str = r"^https?://[A-Za-z]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:[1-9][0-9]{0,3})?([/?][A-Za-z0-9._~!$&()*+,;=:@%/?|\[\]-]*)?(#[A-Za-z0-9._~!$&()*+,;=:@%/?|\[\]-]*)?$";
        openapi::object_of(utoipa::openapi::schema::Type::String, nullable)
            .min_length(Some(1))
            .max_length(Some(2048))
            .pattern(Some(URL))
            .into()
    }
}

/// A password: 8 to 200 characters, no NUL.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(pub String);

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(…)")
    }
}

impl FieldRule for Password {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        let Text::<200>(password) = Text::read(value, name)?;
        if password.chars().count() < 8 {
            return Err(vec![FieldError::new(name, "must be at least 8 characters")]);
        }
        Ok(Password(password))
    }

    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        openapi::object_of(utoipa::openapi::schema::Type::String, nullable)
            .min_length(Some(8))
            .max_length(Some(200))
            .pattern(Some(TEXT_PATTERN))
            .into()
    }
}

/// An RFC 3339 time, as written and as unix milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Time {
    pub text: String,
    pub ms: i64,
}

impl FieldRule for Time {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        let parsed = value.as_str().and_then(|text| {
            let time = chrono::DateTime::parse_from_rfc3339(text).ok()?;
            Some(Time { text: text.to_string(), ms: time.timestamp_millis() })
        });
        parsed.ok_or_else(|| vec![FieldError::new(name, "must be an RFC 3339 time like 2026-01-31T12:00:00Z")])
    }

    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, SchemaFormat, Type};
        openapi::object_of(Type::String, nullable).format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime))).into()
    }
}

/// The state a bulk replay takes messages from: `dead`, the only one it may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadState;

impl FieldRule for DeadState {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        match value.as_str() {
            Some("dead") => Ok(DeadState),
            _ => Err(vec![FieldError::new(name, "must be dead")]),
        }
    }

    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        openapi::enum_of(&["dead"], nullable)
    }
}

/// One of the enum's texts.
macro_rules! text_enum_rule {
    ($($name:ident),+) => {$(
        impl FieldRule for $name {
            fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
                value.as_str().and_then($name::parse).ok_or_else(|| {
                    let texts: Vec<&str> = $name::ALL.iter().map($name::as_str).collect();
                    vec![FieldError::new(name, format!("must be {}", one_of(&texts)))]
                })
            }

            #[cfg(feature = "openapi")]
            fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                let texts: Vec<&str> = $name::ALL.iter().map($name::as_str).collect();
                openapi::enum_of(&texts, nullable)
            }
        }
    )+};
}

pub(super) use text_enum_rule;

text_enum_rule!(ContentMode, MessageState, Role, SignatureScheme, SubscriptionStatus);

/// An id a client names: a [`Text`] of up to 64 characters, of its kind. One that names no
/// such object is the use case's to refuse.
macro_rules! id_rule {
    ($($name:ident),+) => {$(
        impl FieldRule for $name {
            fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
                Text::<64>::read(value, name).map(|Text(id)| $name::from(id))
            }

            #[cfg(feature = "openapi")]
            fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                Text::<64>::schema(nullable)
            }
        }
    )+};
}

id_rule!(CustomerId, SubscriptionId);

/// `a`, `a or b`, `a, b or c`.
pub(super) fn one_of(texts: &[&str]) -> String {
    match texts {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// A retry policy, described by the document's `RetryPolicy` schema.
impl FieldRule for RetryPolicy {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        RetryPolicy::parse(value, name)
    }

    /// A preset's name, or a custom policy written as JSON.
    fn form_value(text: &str) -> Value {
        let text = text.trim();
        serde_json::from_str::<Value>(text).unwrap_or_else(|_| Value::String(text.to_string()))
    }

    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        let policy = utoipa::openapi::Ref::from_schema_name("RetryPolicy");
        if nullable {
            OneOfBuilder::new().item(policy).item(ObjectBuilder::new().schema_type(Type::Null)).into()
        } else {
            policy.into()
        }
    }
}

impl Fields<'_> {
    /// The field read by its rule: `None` when it is absent or null (an error
    /// when `required`) or when it breaks the rule (its errors are kept).
    pub fn rule<R: FieldRule>(&mut self, field: &'static str, required: bool) -> Option<R> {
        self.read_with(field, required, R::read)
    }

    /// A field that `null` clears: `None` when absent, `Some(None)` when null, and `Some(Some(_))`
    /// when it keeps its rule (an error is kept when it breaks it, and the field reads as absent).
    pub fn clearable<R: FieldRule>(&mut self, field: &'static str) -> Option<Option<R>> {
        let given = self.given(field);
        match self.rule::<R>(field, false) {
            Some(value) => Some(Some(value)),
            None if given == Some(true) => Some(None),
            None => None,
        }
    }
}
