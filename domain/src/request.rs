//! Request bodies, each declared once: its fields, whether each is required,
//! and each field's rule, a type that both reads the JSON value and describes
//! it in the OpenAPI document (feature `openapi`). So a constraint is written
//! in one place, and a client generated from the document sends what the
//! server accepts. Reading collects one error per bad field, unknown fields
//! included, named as the client spelled them. Rules that tie fields together
//! stay with the use case that reads the body.

use serde_json::Value;

use crate::errors::FieldError;
use crate::input::{Fields, check_text};
use crate::policy::RetryPolicy;

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
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, SchemaType, Type};

    /// A schema of `ty`, or `null` too when `nullable`.
    pub fn object_of(ty: Type, nullable: bool) -> ObjectBuilder {
        let types = if nullable { SchemaType::from_iter([ty, Type::Null]) } else { SchemaType::new(ty) };
        ObjectBuilder::new().schema_type(types)
    }

    /// An object that takes no field but those it names.
    pub fn closed_object() -> ObjectBuilder {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .additional_properties(Some(AdditionalProperties::FreeForm(false)))
    }
}

/// Declares a request body: a struct of its fields (a required one as its rule's type, an
/// optional one as an `Option`), `read` from JSON, and its schema.
macro_rules! request_body {
    ($(#[$meta:meta])* $name:ident { $($kind:ident $field:ident: $rule:ty),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        pub struct $name { $(pub $field: request_body!(@type $kind $rule)),+ }

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
                    $(.property(stringify!($field), <$rule as FieldRule>::schema(!request_body!(@required $kind))))+;
                $(if request_body!(@required $kind) { object = object.required(stringify!($field)); })+
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
}

request_body! {
    /// `{"name"}` of a customer or an API key.
    NameBody { required name: Text<200> }
}

request_body! {
    /// `{"retry_policy"}` to preview.
    PreviewBody { required retry_policy: RetryPolicy }
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
