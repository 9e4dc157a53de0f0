//! Dashboard users: login and listing.

use std::sync::LazyLock;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordVerifier};
use domain::dto;
use domain::ids::UserId;
use domain::states::Role;

use super::Services;
use super::{Principal, Result};
use crate::clock::to_utc;
use crate::store::entities::user;
use crate::store::users;

/// A hash to verify against when the username is unknown, so that a wrong
/// username costs as long as a wrong password.
static DECOY_HASH: LazyLock<String> = LazyLock::new(|| super::customers::hash_password("no such user"));

/// The user with this name and password, if both are right.
pub async fn verify_login(services: &Services, username: &str, password: &str) -> Result<Option<user::Model>> {
    let found = users::find_by_username(&services.db, username).await?;
    let hash = found.as_ref().map(|u| u.password_hash.clone()).unwrap_or_else(|| DECOY_HASH.clone());
    let password = password.to_string();
    // Argon2 is deliberately slow: keep it off the async threads.
    let valid = tokio::task::spawn_blocking(move || {
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

/// What the dashboard acts as for this user.
pub fn principal(row: &user::Model) -> Principal {
    let actor = format!("user:{}", row.username);
    match (row.role, &row.customer_id) {
        (Role::Admin, _) | (_, None) => Principal::Admin { actor },
        (_, Some(customer_id)) => Principal::Customer { customer_id: customer_id.clone(), actor },
    }
}
