//! `GET /portal/{token}`: a customer portal link opened. A link that opens starts a new
//! session as its customer (the link's role, until the link's time is up) and leads to the
//! overview; one that does not (forged, used, expired) leads to the login page, which says so.

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tower_sessions::cookie::time::OffsetDateTime;
use tower_sessions::{Expiry, Session};

use super::backend::{PORTAL_KEY, PortalGrant, USER_KEY};
use crate::service::{Services, portal};
use crate::store::wal_flush::WroteOnSafeMethod;

/// Where a link that cannot be opened leads.
pub const LINK_REFUSED: &str = "/login?link=expired";

/// Opens the link; its answer waits for the flush of what it wrote, as a write's does, though
/// the request is a GET (a link is followed, not posted).
pub async fn open(State(services): State<Services>, session: Session, Path(token): Path<String>) -> Response {
    let mut response = open_link(&services, session, &token).await;
    response.extensions_mut().insert(WroteOnSafeMethod);
    response
}

async fn open_link(services: &Services, session: Session, token: &str) -> Response {
    let opened = match portal::open_link(services, token).await {
        Ok(Some(opened)) => opened,
        Ok(None) => return see_other(LINK_REFUSED),
        Err(e) => {
            tracing::warn!(error = %e, "opening a portal link failed");
            return (StatusCode::SERVICE_UNAVAILABLE, [(header::RETRY_AFTER, "2")], "try again in a few seconds")
                .into_response();
        }
    };
    let grant = PortalGrant {
        link_id: opened.link_id.to_string(),
        customer_id: opened.customer_id.to_string(),
        customer_name: opened.customer_name,
        role: opened.role,
        return_url: opened.return_url,
        ends_at: opened.session_ends_at,
    };
    let ends = OffsetDateTime::from_unix_timestamp_nanos(opened.session_ends_at as i128 * 1_000_000)
        .unwrap_or_else(|_| OffsetDateTime::now_utc());
    // Whoever this browser was logged in as before, it is now the link's holder, with a new id.
    let started = async {
        session.remove_value(USER_KEY).await?;
        session.cycle_id().await?;
        session.insert(PORTAL_KEY, &grant).await?;
        session.set_expiry(Some(Expiry::AtDateTime(ends)));
        Ok::<_, tower_sessions::session::Error>(())
    };
    match started.await {
        Ok(()) => see_other("/"),
        Err(e) => {
            tracing::warn!(error = %e, "starting a portal session failed");
            (StatusCode::SERVICE_UNAVAILABLE, [(header::RETRY_AFTER, "2")], "try again in a few seconds")
                .into_response()
        }
    }
}

fn see_other(location: &'static str) -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, location), (header::CACHE_CONTROL, "no-store")]).into_response()
}
