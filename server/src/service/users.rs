//! Dashboard users: creating them, login and listing.

use std::sync::LazyLock;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use domain::dto;
use domain::ids::UserId;
use domain::request::UserBody;
use domain::states::Role;
use sea_orm::TransactionTrait;
use serde_json::json;

use super::Services;
use super::{Principal, Result, ServiceError, audit, idempotency};
use crate::clock::to_utc;
use crate::ids;
use crate::store::entities::user;
use crate::store::{customers, is_unique_violation, users};

/// A hash to verify against when the username is unknown, so that a wrong
/// username costs as long as a wrong password.
static DECOY_HASH: LazyLock<String> = LazyLock::new(|| hashed("no such user"));

/// The user with this name and password, if both are right.
pub async fn verify_login(services: &Services, username: &str, password: &str) -> Result<Option<user::Model>> {
    let found = users::find_by_username(&services.db, username).await?;
    let hash = found.as_ref().map(|u| u.password_hash.clone());
    let password = password.to_string();
    // Argon2 is deliberately slow: keep it off the async threads (the decoy is made there too, once).
    let valid = tokio::task::spawn_blocking(move || {
        let hash = hash.unwrap_or_else(|| DECOY_HASH.clone());
        PasswordHash::new(&hash)
            .is_ok_and(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
    })
    .await
    .unwrap_or(false);
    Ok(found.filter(|_| valid))
}

pub async fn get(services: &Services, id: &UserId) -> Result<Option<user::Model>> {
    Ok(users::get(&services.db, id).await?)
}

pub fn view(row: user::Model) -> dto::User {
    dto::User {
        id: row.id.into(),
        username: row.username,
        role: row.role,
        customer_id: row.customer_id.map(Into::into),
        created_at: to_utc(row.created_at),
    }
}

pub async fn list(services: &Services, who: &Principal) -> Result<Vec<dto::User>> {
    who.require_admin()?;
    Ok(users::list(&services.db).await?.into_iter().map(view).collect())
}

/// A dashboard user: a `customer` or `viewer` user names its customer, an `admin` does not.
pub async fn create(services: &Services, who: &Principal, body: UserBody) -> Result<dto::User> {
    who.require_writer()?;
    who.require_admin()?;
    let (username, password, role) = (body.username.0, body.password.0, body.role);
    let customer_id = body.customer_id;
    match (role, &customer_id) {
        (Role::Customer | Role::Viewer, None) => {
            return Err(ServiceError::field("customer_id", "is required for a customer or viewer user"));
        }
        (Role::Admin, Some(_)) => return Err(ServiceError::field("customer_id", "must be empty for an admin")),
        _ => {}
    }
    if let Some(id) = &customer_id {
        customers::get(&services.db, id)
            .await?
            .ok_or_else(|| ServiceError::field("customer_id", "no such customer"))?;
    }
    let row = user::Model {
        id: ids::new(),
        username,
        password_hash: hash_password(password).await,
        role,
        customer_id,
        created_at: services.now_ms(),
    };
    let txn = services.db.begin().await?;
    match users::insert(&txn, row.clone()).await {
        Err(e) if is_unique_violation(&e) => return Err(ServiceError::field("username", "is taken")),
        other => other?,
    }
    let detail = json!({"username": row.username, "role": row.role});
    audit::record(&txn, services, who, "user.create", &row.id, row.customer_id.as_ref(), detail).await?;
    idempotency::commit_answering(txn, view(row)).await
}

/// `password`'s Argon2 hash, made on Tokio's blocking threads: it takes tens of milliseconds of CPU,
/// and on an async worker it would hold up every task queued behind it there (a transaction that holds
/// SQLite's one connection among them). An empty hash, which no password matches, if the work is lost.
async fn hash_password(password: String) -> String {
    tokio::task::spawn_blocking(move || hashed(&password)).await.unwrap_or_default()
}

fn hashed(password: &str) -> String {
    let salt = SaltString::encode_b64(&crate::ids::random_bytes::<16>()).expect("16 bytes make a valid salt");
    Argon2::default().hash_password(password.as_bytes(), &salt).map(|h| h.to_string()).unwrap_or_default()
}

/// On an empty database, creates `admin` with the configured password, or a
/// random one printed once.
pub async fn ensure_admin_user(services: &Services) -> Result<()> {
    if users::count(&services.db).await? > 0 {
        return Ok(());
    }
    let password = match &services.settings.admin_password {
        Some(p) => p.clone(),
        None => {
            let generated = crate::ids::new_api_token().trim_start_matches("hk_")[..20].to_string();
            tracing::warn!("created the dashboard user `admin` with the password {generated} (shown once)");
            generated
        }
    };
    let row = user::Model {
        id: ids::new(),
        username: "admin".into(),
        password_hash: hash_password(password).await,
        role: Role::Admin,
        customer_id: None,
        created_at: services.now_ms(),
    };
    match users::insert(&services.db, row).await {
        Err(e) if is_unique_violation(&e) => Ok(()),
        other => Ok(other?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_password_is_hashed_off_the_async_thread() {
        // This test's runtime has one thread: had the hash run on it, the spawned task would
        // have finished within its first poll, before this one resumed.
        let hashing = tokio::spawn(hash_password("correct horse".into()));
        tokio::task::yield_now().await;
        assert!(!hashing.is_finished(), "the hash ran on the runtime's thread");
        let hash = hashing.await.unwrap();
        let parsed = PasswordHash::new(&hash).unwrap();
        assert!(Argon2::default().verify_password(b"correct horse", &parsed).is_ok());
    }
}
