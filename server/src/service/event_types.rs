//! The event-type catalog: each customer's types, with a JSON Schema for their
//! events' `data` that publishing checks, and an example that `send-example`
//! publishes to one subscription. A change to the catalog changes the customer's
//! routing version, so every process checks the next publish with it.

use domain::data_schema::DataSchema;
use domain::dto;
use domain::request::{AnyJson, EventTypeBody, EventTypePatch, JsonSchemaDocument, Text};
use sea_orm::TransactionTrait;
use serde_json::{Value, json};

use super::{Principal, Result, ServiceError, Services, audit, idempotency, views};
use crate::ids;
use crate::store::entities::event_type;
use crate::store::page::{self, PageRequest};
use crate::store::{customers, event_types};

/// Checks that the schema is JSON Schema and the example keeps it.
fn check(schema: Option<&Value>, example: Option<&Value>) -> Result<()> {
    let Some(schema) = schema else { return Ok(()) };
    let compiled = DataSchema::compile(schema).map_err(|why| ServiceError::field("schema", &why))?;
    let broken = example.map(|example| compiled.check(example)).unwrap_or_default();
    if broken.is_empty() {
        return Ok(());
    }
    let why = format!("does not validate against the schema: {}", broken.join("; "));
    Err(ServiceError::field("example", &why))
}

fn json_of(text: &Option<String>) -> Option<Value> {
    text.as_deref().and_then(|t| serde_json::from_str(t).ok())
}

pub async fn create(services: &Services, who: &Principal, body: EventTypeBody) -> Result<dto::EventType> {
    who.require_writer()?;
    let customer_id = who.customer_for_write(body.customer_id.as_deref())?;
    let schema = body.schema.map(|JsonSchemaDocument(schema)| schema);
    let example = body.example.map(|AnyJson(example)| example);
    check(schema.as_ref(), example.as_ref())?;
    customers::get(&services.db, &customer_id).await?.ok_or(ServiceError::NotFound("customer"))?;
    let now = services.now_ms();
    let row = event_type::Model {
        id: ids::new(),
        customer_id,
        name: body.name.0,
        description: body.description.map(|Text(text)| text),
        schema: schema.as_ref().map(Value::to_string),
        example: example.as_ref().map(Value::to_string),
        created_at: now,
        updated_at: now,
    };
    let txn = services.db.begin().await?;
    if !event_types::insert(&txn, row.clone()).await? {
        return Err(ServiceError::Conflict(format!("the catalog already has the type {:?}", row.name)));
    }
    if row.schema.is_some() {
        customers::bump_routing_version(&txn, &row.customer_id).await?;
    }
    let detail = json!({"name": row.name, "description": row.description, "schema": schema, "example": example});
    audit::record(&txn, services, who, "event_type.create", &row.name, Some(&row.customer_id), detail).await?;
    idempotency::commit_answering(txn, views::event_type(row)).await
}

/// The type the caller may see: a customer's own, or the admin's for the customer it names.
async fn visible(
    services: &Services,
    who: &Principal,
    customer_id: Option<&str>,
    name: &str,
) -> Result<event_type::Model> {
    let customer_id = who.customer_for_write(customer_id)?;
    event_types::get(&services.db, &customer_id, name).await?.ok_or(ServiceError::NotFound("event type"))
}

pub async fn get(
    services: &Services,
    who: &Principal,
    customer_id: Option<&str>,
    name: &str,
) -> Result<dto::EventType> {
    Ok(views::event_type(visible(services, who, customer_id, name).await?))
}

/// The catalog, newest first (every customer's for the admin without `customer_id`).
pub async fn list(
    services: &Services,
    who: &Principal,
    customer_id: Option<&str>,
    page: PageRequest,
) -> Result<dto::Page<dto::EventType>> {
    let rows = event_types::list(&services.db, who.customer_filter(customer_id).as_ref(), &page).await?;
    let (rows, next_cursor) = page::finish(rows, page.limit, |r| &r.id);
    Ok(dto::Page::of(rows.into_iter().map(views::event_type).collect(), next_cursor))
}

pub async fn update(
    services: &Services,
    who: &Principal,
    customer_id: Option<&str>,
    name: &str,
    patch: EventTypePatch,
) -> Result<dto::EventType> {
    who.require_writer()?;
    let customer_id = who.customer_for_write(customer_id)?;
    let txn = services.db.begin().await?;
    // Read in the change's transaction, locked: a concurrent change is applied before or after
    // this one, never lost under it.
    let mut row =
        event_types::get_for_update(&txn, &customer_id, name).await?.ok_or(ServiceError::NotFound("event type"))?;
    let mut detail = serde_json::Map::new();
    if let Some(description) = patch.description {
        row.description = description.map(|Text(text)| text);
        detail.insert("description".into(), json!(row.description));
    }
    if let Some(schema) = patch.schema {
        let schema = schema.map(|JsonSchemaDocument(schema)| schema);
        row.schema = schema.as_ref().map(Value::to_string);
        detail.insert("schema".into(), json!(schema));
    }
    if let Some(example) = patch.example {
        let example = example.map(|AnyJson(example)| example);
        row.example = example.as_ref().map(Value::to_string);
        detail.insert("example".into(), json!(example));
    }
    check(json_of(&row.schema).as_ref(), json_of(&row.example).as_ref())?;
    row.updated_at = services.now_ms();
    event_types::update(&txn, row.clone()).await?;
    // Every change tells every process to read the catalog again: the schemas they check are
    // never older than the last change committed.
    customers::bump_routing_version(&txn, &row.customer_id).await?;
    detail.insert("name".into(), json!(row.name));
    let detail = Value::Object(detail);
    audit::record(&txn, services, who, "event_type.update", &row.name, Some(&row.customer_id), detail).await?;
    idempotency::commit_answering(txn, views::event_type(row)).await
}

pub async fn delete(services: &Services, who: &Principal, customer_id: Option<&str>, name: &str) -> Result<()> {
    who.require_writer()?;
    let customer_id = who.customer_for_write(customer_id)?;
    let txn = services.db.begin().await?;
    let row =
        event_types::get_for_update(&txn, &customer_id, name).await?.ok_or(ServiceError::NotFound("event type"))?;
    event_types::delete(&txn, &row.id).await?;
    customers::bump_routing_version(&txn, &row.customer_id).await?;
    let detail = json!({"name": row.name});
    audit::record(&txn, services, who, "event_type.delete", &row.name, Some(&row.customer_id), detail).await?;
    idempotency::keep_answer::<()>(&txn, None).await?;
    txn.commit().await?;
    Ok(())
}
