//! Customers and their API keys.

use domain::dto;
use domain::ids::{ApiKeyId, CustomerId};
use domain::request::NameBody;
use sea_orm::TransactionTrait;
use serde_json::json;

use super::Services;
use super::{Principal, Result, ServiceError, audit, idempotency, views};
use crate::ids::{self, new_api_token, token_hash};
use crate::store::entities::{api_key, customer};
use crate::store::page::{self, PageRequest};
use crate::store::{self, customers};

pub async fn create(services: &Services, who: &Principal, body: NameBody) -> Result<dto::Customer> {
    who.require_writer()?;
    who.require_admin()?;
    let row = customer::Model { id: ids::new(), name: body.name.0, created_at: services.now_ms() };
    let txn = services.db.begin().await?;
    customers::insert(&txn, row.clone()).await?;
    audit::record(&txn, services, who, "customer.create", &row.id, Some(&row.id), json!({"name": row.name})).await?;
    idempotency::commit_answering(txn, views::customer(row)).await
}

pub async fn list(services: &Services, who: &Principal, page: PageRequest) -> Result<dto::Page<dto::Customer>> {
    who.require_admin()?;
    let rows = customers::list(&services.db, &page).await?;
    let (rows, next_cursor) = page::finish(rows, page.limit, |r| &r.id);
    Ok(dto::Page::of(rows.into_iter().map(views::customer).collect(), next_cursor))
}

pub async fn create_api_key(
    services: &Services,
    who: &Principal,
    customer_id: &CustomerId,
    body: NameBody,
) -> Result<dto::ApiKeyCreated> {
    who.require_writer()?;
    who.require_admin()?;
    customers::get(&services.db, customer_id).await?.ok_or(ServiceError::NotFound("customer"))?;
    let token = new_api_token();
    let row = api_key::Model {
        id: ids::new(),
        customer_id: customer_id.clone(),
        name: body.name.0,
        token_hash: token_hash(&token),
        created_at: services.now_ms(),
        last_used_at: None,
    };
    let txn = services.db.begin().await?;
    store::api_keys::insert(&txn, row.clone()).await?;
    audit::record(&txn, services, who, "api_key.create", &row.id, Some(customer_id), json!({"name": row.name})).await?;
    let created = dto::ApiKeyCreated {
        id: row.id.into(),
        customer_id: row.customer_id.into(),
        name: row.name,
        token,
        created_at: crate::clock::to_utc(row.created_at),
    };
    idempotency::commit_answering(txn, created).await
}

/// A customer's API keys, without their tokens: for the admin, or the customer's own key.
pub async fn list_api_keys(services: &Services, who: &Principal, customer_id: &CustomerId) -> Result<Vec<dto::ApiKey>> {
    own_customer(services, who, customer_id).await?;
    let keys = store::api_keys::of_customer(&services.db, customer_id).await?;
    Ok(keys.into_iter().map(views::api_key).collect())
}

/// Revokes one of a customer's keys, with an audit row, in one transaction.
/// Returns the key's token hash, so that the caller can forget it at once.
pub async fn revoke_api_key(
    services: &Services,
    who: &Principal,
    customer_id: &CustomerId,
    key_id: &ApiKeyId,
) -> Result<String> {
    who.require_writer()?;
    own_customer(services, who, customer_id).await?;
    let txn = services.db.begin().await?;
    let key = store::api_keys::remove(&txn, customer_id, key_id).await?.ok_or(ServiceError::NotFound("API key"))?;
    let detail = json!({"name": key.name});
    audit::record(&txn, services, who, "api_key.revoke", key_id, Some(customer_id), detail).await?;
    idempotency::keep_answer::<()>(&txn, None).await?;
    txn.commit().await?;
    Ok(key.token_hash)
}

/// The admin may act for any existing customer, a customer's key only for its own.
async fn own_customer(services: &Services, who: &Principal, customer_id: &CustomerId) -> Result<()> {
    if !who.sees(customer_id) {
        return Err(ServiceError::NotFound("customer"));
    }
    customers::get(&services.db, customer_id).await?.ok_or(ServiceError::NotFound("customer"))?;
    Ok(())
}

/// The customer an API key acts for, found by its token's hash; `None` when no key has it.
pub async fn key_owner(services: &Services, token_hash: &str) -> Result<Option<Principal>> {
    let key = store::api_keys::find_by_hash(&services.db, token_hash).await?;
    Ok(key.map(|key| Principal::Customer { customer_id: key.customer_id, actor: key.id.into() }))
}
