//! The pieces of a request body's schema that its rules share.

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{AdditionalProperties, Object, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type};

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

/// A user's `customer_id`: required with the roles `customer` and `viewer`, absent or null with `admin`.
pub fn customer_names_customer(user: &mut Object) {
    let role = |roles: &[&str]| ObjectBuilder::new().schema_type(Type::String).enum_values(Some(roles.to_vec()));
    let customer = ObjectBuilder::new()
        .property("role", role(&["customer", "viewer"]))
        .property("customer_id", ObjectBuilder::new().schema_type(Type::String))
        .required("customer_id");
    let admin = ObjectBuilder::new()
        .property("role", role(&["admin"]))
        .property("customer_id", ObjectBuilder::new().schema_type(Type::Null));
    // utoipa's Object has no `oneOf` next to `properties`: added as a raw keyword.
    let one_of = serde_json::json!([customer.build(), admin.build()]);
    user.extensions.get_or_insert_with(Default::default).insert("oneOf".into(), one_of);
}

/// An object that takes no field but those it names.
pub fn closed_object() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::Object).additional_properties(Some(AdditionalProperties::FreeForm(false)))
}
