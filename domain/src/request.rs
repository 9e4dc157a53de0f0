//! Request bodies, each declared once: its fields, whether each is required,
//! and each field's rule, a type that both reads the JSON value and describes
//! it in the OpenAPI document (feature `openapi`). So a constraint is written
//! in one place, and a client generated from the document sends what the
//! server accepts. Reading collects one error per bad field, unknown fields
//! included, named as the client spelled them. Rules that tie fields together
//! stay with the use case that reads the body.

use serde_json::Value;

use crate::dto::Backlog;
use crate::errors::FieldError;
use crate::ids::{CustomerId, SubscriptionId};
use crate::input::{Fields, check_text, whole_number};
use crate::policy::RetryPolicy;
use crate::states::{ContentMode, MessageState, Role, SubscriptionStatus};
use crate::target::TargetUrl;

/// How one field's present, non-null value is read and described.
pub trait FieldRule: Sized {
    /// Reads the value of the field named `name` (the path as the client spelled it).
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>>;

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

    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        openapi::object_of(utoipa::openapi::schema::Type::String, nullable)
            .min_length(Some(1))
            .max_length(Some(MAX))
            .pattern(Some(TEXT_PATTERN))
            .into()
    }
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

text_enum_rule!(ContentMode, MessageState, Role, SubscriptionStatus);

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
fn one_of(texts: &[&str]) -> String {
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
        let name = self.name(field);
        match self.value(field) {
            None => {
                if required {
                    self.error(field, "is required");
                }
                None
            }
            Some(value) => R::read(value, &name).map_err(|errors| self.errors.extend(errors)).ok(),
        }
    }
}

#[cfg(feature = "openapi")]
pub mod openapi {
    use utoipa::openapi::RefOr;
    use utoipa::openapi::schema::{
        AdditionalProperties, Object, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type,
    };

    /// A schema of `ty`, or `null` too when `nullable`.
    pub fn object_of(ty: Type, nullable: bool) -> ObjectBuilder {
        let types = if nullable { SchemaType::from_iter([ty, Type::Null]) } else { SchemaType::new(ty) };
        ObjectBuilder::new().schema_type(types)
    }

    /// One of `values`, or `null` too when `nullable`.
    pub fn enum_of(values: &[&str], nullable: bool) -> RefOr<Schema> {
        let values = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(values.iter().copied())).build();
        if nullable {
            OneOfBuilder::new().item(values).item(ObjectBuilder::new().schema_type(Type::Null)).into()
        } else {
            values.into()
        }
    }

    /// A doc comment's lines as one line of text.
    pub fn doc_text(lines: &[&str]) -> String {
        lines.iter().map(|line| line.trim()).collect::<Vec<_>>().join(" ")
    }

    /// The schema with a description (the field's doc comment, its lines joined).
    pub fn describe(schema: RefOr<Schema>, lines: &[&str]) -> RefOr<Schema> {
        let text = doc_text(lines);
        if text.is_empty() {
            return schema;
        }
        match schema {
            RefOr::Ref(mut reference) => {
                reference.description = text;
                RefOr::Ref(reference)
            }
            RefOr::T(mut schema) => {
                match &mut schema {
                    Schema::Object(object) => object.description = Some(text),
                    Schema::Array(array) => array.description = Some(text),
                    Schema::OneOf(one_of) => one_of.description = Some(text),
                    Schema::AnyOf(any_of) => any_of.description = Some(text),
                    Schema::AllOf(all_of) => all_of.description = Some(text),
                    _ => {}
                }
                RefOr::T(schema)
            }
        }
    }

    /// A user's `customer_id`: required with the role `customer`, absent or null with `admin`.
    pub fn customer_names_customer(user: &mut Object) {
        let role = |role: &str| ObjectBuilder::new().schema_type(Type::String).enum_values(Some([role]));
        let customer = ObjectBuilder::new()
            .property("role", role("customer"))
            .property("customer_id", ObjectBuilder::new().schema_type(Type::String))
            .required("customer_id");
        let admin = ObjectBuilder::new()
            .property("role", role("admin"))
            .property("customer_id", ObjectBuilder::new().schema_type(Type::Null));
        // utoipa's Object has no `oneOf` next to `properties`: added as a raw keyword.
        let one_of = serde_json::json!([customer.build(), admin.build()]);
        user.extensions.get_or_insert_with(Default::default).insert("oneOf".into(), one_of);
    }

    /// An object that takes no field but those it names.
    pub fn closed_object() -> ObjectBuilder {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .additional_properties(Some(AdditionalProperties::FreeForm(false)))
    }
}

/// Declares a request body: a struct of its fields (a required one as its rule's type, an
/// optional one as an `Option`), `read` from JSON, and its schema. Given `patch`, it also declares
/// the body that changes such an object: the same fields, each optional, less those after `;`
/// (set only when the object is created). Given `schema then f`, `f` adds to the schema what ties
/// fields together (their rule is the use case's).
macro_rules! request_body {
    (
        $(#[$meta:meta])* $name:ident, patch $(#[$patch_meta:meta])* $patch:ident {
            $($(#[doc = $doc:literal])* $kind:ident $field:ident: $rule:ty),+ ;
            $(optional $create_only:ident: $create_only_rule:ty),* $(,)?
        }
    ) => {
        request_body! {
            $(#[$meta])* $name {
                $($(#[doc = $doc])* $kind $field: $rule,)+
                $(optional $create_only: $create_only_rule,)*
            }
        }
        request_body! {
            $(#[$patch_meta])* $patch { $($(#[doc = $doc])* optional $field: $rule,)+ }
        }

        impl $name {
            /// The body as a change of every field it shares with the patch.
            pub fn to_patch(&self) -> $patch {
                $patch { $($field: request_body!(@some $kind self.$field.clone())),+ }
            }
        }
    };
    (
        $(#[$meta:meta])* $name:ident $(, schema then $finish:path)? {
            $($(#[doc = $doc:literal])* $kind:ident $field:ident: $rule:ty),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        pub struct $name { $($(#[doc = $doc])* pub $field: request_body!(@type $kind $rule)),+ }

        impl $name {
            /// Reads the body, or every error of its fields.
            pub fn read(body: &Value) -> Result<$name, Vec<FieldError>> {
                let mut f = Fields::new(body, "")?;
                $(let $field = f.rule::<$rule>(stringify!($field), request_body!(@required $kind));)+
                f.finish()?;
                Ok($name { $($field: request_body!(@take $kind $field)),+ })
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                let mut object = openapi::closed_object()
                    $(.property(stringify!($field), openapi::describe(
                        <$rule as FieldRule>::schema(!request_body!(@required $kind)),
                        &[$($doc),*],
                    )))+;
                $(if request_body!(@required $kind) { object = object.required(stringify!($field)); })+
                #[allow(unused_mut)]
                let mut object = object.build();
                $($finish(&mut object);)?
                object.into()
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(stringify!($name))
            }
        }
    };
    (@type required $rule:ty) => { $rule };
    (@type optional $rule:ty) => { Option<$rule> };
    (@required required) => { true };
    (@required optional) => { false };
    (@take required $field:ident) => { $field.expect("a required field is present when there are no errors") };
    (@take optional $field:ident) => { $field };
    (@some required $value:expr) => { Some($value) };
    (@some optional $value:expr) => { $value };
}

request_body! {
    /// `{"name"}` of a customer or an API key.
    NameBody { required name: Text<200> }
}

request_body! {
    /// `{"retry_policy"}` to preview.
    PreviewBody { required retry_policy: RetryPolicy }
}

request_body! {
    /// A subscription to create. The admin names the customer in `customer_id`; a customer's key
    /// may leave it out (it is ignored).
    SubscriptionBody,
    patch
    /// The fields to change; absent or null fields stay as they are, and an empty body changes nothing.
    SubscriptionPatch {
        required name: Text<200>,
        required url: TargetUrl,
        /// Event types to deliver: exact types, or `*` for all but Herald's operational events
        /// (`herald.endpoint.disabled`, `herald.endpoint.locked`, `herald.endpoint.closed`,
        /// `herald.message.dead`), which are received only when named
        required event_types: EventTypes,
        /// Default `event-grid`
        optional retry_policy: RetryPolicy,
        optional timeout_ms: Integer<1000, 60000>,
        optional content_mode: ContentMode,
        optional status: SubscriptionStatus;
        optional customer_id: CustomerId,
    }
}

request_body! {
    /// Replays every `dead` message that matches. With the admin token, `customer_id` limits it to one
    /// customer (all customers when absent).
    BulkReplayBody {
        required state: DeadState,
        optional subscription_id: SubscriptionId,
        optional event_type: Text<200>,
        /// RFC 3339
        optional since: Time,
        /// RFC 3339
        optional until: Time,
        optional customer_id: CustomerId,
    }
}

request_body! {
    /// A window of kept events to send again to one subscription: every event published in
    /// `[since, until)` (at most 366 days) that the subscription accepts, narrowed by `event_types`
    /// and `source`, gets a new message for it.
    ReplayWindowBody {
        /// RFC 3339
        required since: Time,
        /// RFC 3339; after `since`, at most 366 days later
        required until: Time,
        required subscription_id: SubscriptionId,
        optional event_types: EventTypes,
        optional source: Text<1024>,
    }
}

request_body! {
    /// A dashboard user: a `customer` user names its customer, an `admin` does not.
    UserBody, schema then openapi::customer_names_customer {
        required username: Text<100>,
        required password: Password,
        required role: Role,
        optional customer_id: CustomerId,
    }
}

/// The longest `older_than_secs` an unlock takes: ten years.
pub const MAX_OLDER_THAN_SECS: i64 = 10 * 366 * 86_400;

/// What an unlock does with the messages the lock held: `deliver` them (the default), end them
/// `dead` (`dead_reason` `expired`), or `dead_older_than` ends those created more than
/// `older_than_secs` ago and delivers the rest. Its two fields go together, so its schema is a
/// `oneOf` of the two shapes it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnlockBody(pub Backlog);

/// The choice `backlog` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BacklogChoice {
    Deliver,
    Dead,
    DeadOlderThan,
}

impl FieldRule for BacklogChoice {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        match value.as_str() {
            Some("deliver") => Ok(BacklogChoice::Deliver),
            Some("dead") => Ok(BacklogChoice::Dead),
            Some("dead_older_than") => Ok(BacklogChoice::DeadOlderThan),
            _ => Err(vec![FieldError::new(name, "must be deliver, dead or dead_older_than")]),
        }
    }

    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        openapi::enum_of(&["deliver", "dead", "dead_older_than"], nullable)
    }
}

type OlderThanSecs = Integer<1, MAX_OLDER_THAN_SECS>;

impl UnlockBody {
    /// Reads the body, or every error of its fields; both fields are optional (an empty body
    /// delivers the backlog), and `older_than_secs` goes with `dead_older_than` only.
    pub fn read(body: &Value) -> Result<UnlockBody, Vec<FieldError>> {
        let mut f = Fields::new(body, "")?;
        let choice = f.rule::<BacklogChoice>("backlog", false);
        let older_than = f.rule::<OlderThanSecs>("older_than_secs", false);
        let named_badly = |f: &Fields, field: &str| f.errors.iter().any(|e| e.field == field);
        let backlog = match (choice, older_than) {
            (None | Some(BacklogChoice::Deliver), None) => Backlog::Deliver,
            (Some(BacklogChoice::Dead), None) => Backlog::Dead,
            (Some(BacklogChoice::DeadOlderThan), Some(Integer(secs))) => Backlog::DeadOlderThan { secs },
            (Some(BacklogChoice::DeadOlderThan), None) => {
                if !named_badly(&f, "older_than_secs") {
                    f.error("older_than_secs", "is required when backlog is dead_older_than");
                }
                Backlog::Deliver
            }
            (None | Some(BacklogChoice::Deliver | BacklogChoice::Dead), Some(_)) => {
                if !named_badly(&f, "backlog") {
                    f.error("older_than_secs", "is only for backlog dead_older_than");
                }
                Backlog::Deliver
            }
        };
        f.finish()?;
        Ok(UnlockBody(backlog))
    }
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for UnlockBody {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::OneOfBuilder;
        let with_secs = openapi::closed_object()
            .property("backlog", openapi::enum_of(&["dead_older_than"], false))
            .property("older_than_secs", OlderThanSecs::schema(false))
            .required("backlog")
            .required("older_than_secs");
        let without = openapi::closed_object().property("backlog", openapi::enum_of(&["deliver", "dead"], false));
        OneOfBuilder::new().item(without).item(with_secs).into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for UnlockBody {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("UnlockBody")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_body_is_read_with_every_bad_field_named() {
        assert_eq!(NameBody::read(&json!({"name": "Acme"})).unwrap().name, Text("Acme".into()));
        let fields =
            |body: Value| -> Vec<String> { NameBody::read(&body).unwrap_err().into_iter().map(|e| e.field).collect() };
        assert_eq!(fields(json!({})), ["name"]);
        assert_eq!(fields(json!({"name": null})), ["name"]);
        assert_eq!(fields(json!({"name": " ", "colour": "red"})), ["name", "colour"]);
        assert_eq!(fields(json!({"name": "x".repeat(201)})), ["name"]);
        assert_eq!(fields(json!([])), ["body"]);
        let policy = PreviewBody::read(&json!({"retry_policy": {"kind": "schedule", "delays_secs": [0]}}));
        let fields: Vec<String> = policy.unwrap_err().into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["retry_policy.delays_secs[0]"], "a rule's own errors keep their path");
        let window = ReplayWindowBody::read(&json!({"since": "yesterday", "until": 5, "subscription_id": "sub_1"}));
        let fields: Vec<String> = window.unwrap_err().into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["since", "until"], "both times are named at once");
        let window = ReplayWindowBody::read(&json!({
            "since": "2026-01-31T12:00:00Z", "until": "2026-01-31T13:00:00+01:00", "subscription_id": "sub_1",
        }));
        let window = window.unwrap();
        assert_eq!((window.until.ms - window.since.ms, window.until.text.as_str()), (0, "2026-01-31T13:00:00+01:00"));
        let bulk: Vec<String> =
            BulkReplayBody::read(&json!({"state": "held"})).unwrap_err().into_iter().map(|e| e.message).collect();
        assert_eq!(bulk, ["must be dead"]);
        let user = UserBody::read(&json!({"username": "ann", "password": "ééééééé", "role": "root"})).unwrap_err();
        let named: Vec<(&str, &str)> = user.iter().map(|e| (e.field.as_str(), e.message.as_str())).collect();
        let expected = [("password", "must be at least 8 characters"), ("role", "must be admin or customer")];
        assert_eq!(named, expected, "seven characters are too few, however many bytes they take");
    }

    #[test]
    fn an_unlock_reads_its_two_fields_together() {
        let read = |body: Value| UnlockBody::read(&body).map(|b| b.0);
        assert_eq!(read(json!({})), Ok(Backlog::Deliver));
        assert_eq!(read(json!({"backlog": "dead"})), Ok(Backlog::Dead));
        let older = read(json!({"backlog": "dead_older_than", "older_than_secs": 60.0}));
        assert_eq!(older, Ok(Backlog::DeadOlderThan { secs: 60 }));
        let named = |body: Value| -> Vec<(String, String)> {
            read(body).unwrap_err().into_iter().map(|e| (e.field, e.message)).collect()
        };
        let one = |field: &str, message: &str| vec![(field.to_string(), message.to_string())];
        assert_eq!(
            named(json!({"backlog": "dead_older_than"})),
            one("older_than_secs", "is required when backlog is dead_older_than")
        );
        assert_eq!(
            named(json!({"older_than_secs": 60})),
            one("older_than_secs", "is only for backlog dead_older_than")
        );
        assert_eq!(
            named(json!({"backlog": 5, "older_than_secs": 60})),
            one("backlog", "must be deliver, dead or dead_older_than"),
            "a bad choice is named alone"
        );
        assert_eq!(
            named(json!({"backlog": "dead_older_than", "older_than_secs": 0})),
            one("older_than_secs", "must be an integer from 1 to 316224000")
        );
    }

    #[cfg(feature = "openapi")]
    #[test]
    fn a_body_describes_its_fields_as_it_reads_them() {
        use utoipa::PartialSchema;
        let schema = serde_json::to_value(NameBody::schema()).unwrap();
        let expected = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": TEXT_PATTERN}},
            "required": ["name"],
        });
        assert_eq!(schema, expected);
        let preview = serde_json::to_value(PreviewBody::schema()).unwrap();
        assert_eq!(preview["properties"]["retry_policy"], json!({"$ref": "#/components/schemas/RetryPolicy"}));
    }
}
