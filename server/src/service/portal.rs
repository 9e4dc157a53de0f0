//! The customer portal: a one-time link that opens the dashboard as one customer, without a
//! password. Only the SHA-256 of a link's token is stored; opening it marks it used in one
//! statement, so it opens once, and never after it expired.

use domain::dto;
use domain::ids::{CustomerId, PortalLinkId};
use domain::request::{DEFAULT_PORTAL_TTL_SECS, PortalLinkBody};
use domain::states::PortalRole;
use sea_orm::TransactionTrait;
use serde_json::json;

use super::{Principal, Result, ServiceError, Services, audit, idempotency};
use crate::clock::to_utc;
use crate::ids::{self, new_portal_token, token_hash};
use crate::store::entities::portal_link;
use crate::store::{customers, portal_links};

/// The path a link's token is opened at, under the dashboard.
pub const PORTAL_PATH: &str = "/portal/";

/// A new link for `customer_id` (the admin, or the customer's own key), starting with `base_url`
/// (where the dashboard is reached). The answer is the only place the token appears; a request
/// with an `Idempotency-Key` keeps it, sealed, with its answer for 24 h, so that a retry gets
/// the same link.
pub async fn create_link(
    services: &Services,
    who: &Principal,
    customer_id: &CustomerId,
    body: PortalLinkBody,
    base_url: &str,
) -> Result<dto::PortalLink> {
    who.require_writer()?;
    let no_such = ServiceError::NotFoundField { field: "id", what: "customer" };
    if !who.sees(customer_id) {
        return Err(no_such);
    }
    customers::get(&services.db, customer_id).await?.ok_or(no_such)?;
    let token = new_portal_token();
    let now = services.now_ms();
    let ttl_secs = body.ttl_secs.map_or(DEFAULT_PORTAL_TTL_SECS, |t| t.0);
    let row = portal_link::Model {
        id: ids::new(),
        token_hash: token_hash(&token),
        customer_id: customer_id.clone(),
        role: body.role.unwrap_or(PortalRole::Viewer),
        return_url: body.return_url.map(|u| u.0),
        ttl_secs,
        expires_at: now + ttl_secs * 1000,
        used_at: None,
        created_at: now,
    };
    let link = dto::PortalLink {
        url: format!("{}{PORTAL_PATH}{token}", base_url.trim_end_matches('/')),
        expires_at: to_utc(row.expires_at),
    };
    let txn = services.db.begin().await?;
    portal_links::insert(&txn, row.clone()).await?;
    let detail = json!({"role": row.role, "ttl_secs": ttl_secs, "expires_at": link.expires_at});
    audit::record(&txn, services, who, "portal_link.create", &row.id, Some(customer_id), detail).await?;
    idempotency::commit_answering(txn, link).await
}

/// A link opened: whom its session acts for, and until when.
#[derive(Debug, Clone)]
pub struct Opened {
    pub link_id: PortalLinkId,
    pub customer_id: CustomerId,
    pub customer_name: String,
    pub role: PortalRole,
    pub return_url: Option<String>,
    /// When the session it opens ends (unix milliseconds).
    pub session_ends_at: i64,
}

/// Opens the link with this token, once: `None` when no unused, unexpired link has it (forged,
/// used, expired, or its customer removed). Writes `portal_link.use` in the same transaction.
pub async fn open_link(services: &Services, token: &str) -> Result<Option<Opened>> {
    let now = services.now_ms();
    let txn = services.db.begin().await?;
    let Some(link) = portal_links::open(&txn, &token_hash(token), now).await? else { return Ok(None) };
    let Some(customer) = customers::get(&txn, &link.customer_id).await? else { return Ok(None) };
    let who = principal(&link.id, &link.customer_id, link.role);
    audit::record(
        &txn,
        services,
        &who,
        "portal_link.use",
        &link.id,
        Some(&link.customer_id),
        json!({"role": link.role}),
    )
    .await?;
    txn.commit().await?;
    Ok(Some(Opened {
        link_id: link.id,
        customer_id: link.customer_id,
        customer_name: customer.name,
        role: link.role,
        return_url: link.return_url,
        session_ends_at: now + link.ttl_secs * 1000,
    }))
}

/// Whom a portal session acts as: the customer (`editor`) or its viewer, named by the link.
pub fn principal(link_id: &PortalLinkId, customer_id: &CustomerId, role: PortalRole) -> Principal {
    let (customer_id, actor) = (customer_id.clone(), format!("portal:{link_id}"));
    match role {
        PortalRole::Editor => Principal::Customer { customer_id, actor },
        PortalRole::Viewer => Principal::Viewer { customer_id, actor },
    }
}
