//! What a subscription adds to each delivery: its extra headers, its credentials and its
//! signature scheme. Checked against the server's target rules, sealed before they are stored,
//! opened for the subscription's view, and described for the audit without a secret value.

use domain::request::{DeliveryAuth, ExtraHeaders};
use domain::signing::new_secret;
use domain::states::SignatureScheme;
use serde_json::{Value, json};

use super::views::OpenedSecrets;
use super::{Result, ServiceError, Services};
use crate::ids::random_bytes;
use crate::secrets::Unsealable;
use crate::store::entities::subscription;
use crate::subscription_secrets::{open_auth, open_headers, seal_auth, seal_headers};

/// How long the previous secret keeps signing after a rotation or a change of scheme.
pub const ROTATION_OVERLAP_MS: i64 = 24 * 3600 * 1000;

/// An OAuth 2.0 `token_url` obeys the rules of a target URL: no private address unless allowed.
pub fn check_auth(services: &Services, auth: Option<&DeliveryAuth>) -> Result<()> {
    match auth {
        Some(DeliveryAuth::OAuth2 { token_url, .. })
            if !services.settings.allow_private_targets && token_url.is_forbidden_literal() =>
        {
            Err(ServiceError::field("auth.token_url", "targets a private, loopback or link-local address"))
        }
        _ => Ok(()),
    }
}

/// Sets the row's sealed headers (`None`: none).
pub fn set_headers(services: &Services, row: &mut subscription::Model, headers: Option<&ExtraHeaders>) {
    row.headers = headers.and_then(|headers| seal_headers(&services.sealer, &row.id, headers));
}

/// Sets the row's sealed credentials (`None`: none).
pub fn set_auth(services: &Services, row: &mut subscription::Model, auth: Option<&DeliveryAuth>) {
    row.auth = auth.map(|auth| seal_auth(&services.sealer, &row.id, auth));
}

/// A new secret of `scheme` for the row, sealed; the opened secret is returned. With `now`, the
/// current one keeps signing for [`ROTATION_OVERLAP_MS`] beside it.
pub fn new_signing_secret(
    services: &Services,
    row: &mut subscription::Model,
    scheme: SignatureScheme,
    rotated_at: Option<i64>,
) -> String {
    let secret = new_secret(scheme, random_bytes::<32>());
    let sealed = services.sealer.seal(&secret, &row.id);
    let previous = std::mem::replace(&mut row.secret, sealed);
    if let Some(now) = rotated_at {
        row.previous_secret = Some(previous);
        row.previous_secret_expires_at = Some(now + ROTATION_OVERLAP_MS);
    }
    row.signature = scheme;
    secret
}

/// Every secret the row's view needs, opened.
pub fn open(services: &Services, row: &subscription::Model) -> Result<OpenedSecrets> {
    Ok(OpenedSecrets {
        secret: services.sealer.open(&row.secret, &row.id)?,
        headers: open_headers(&services.sealer, &row.id, row.headers.as_deref())?,
        auth: open_auth(&services.sealer, &row.id, row.auth.as_deref())?,
    })
}

/// What a list shows of each row: a value that does not open (a wrong key, a damaged row) is
/// logged and left out, so that one row cannot make the whole page fail.
pub fn open_listed(services: &Services, row: &subscription::Model) -> OpenedSecrets {
    let logged = |part: &'static str| move |e: Unsealable| tracing::error!(subscription_id = %row.id, part, error = %e, "a sealed value did not open");
    let sealer = &services.sealer;
    OpenedSecrets {
        secret: sealer.open(&row.secret, &row.id).map_err(logged("secret")).unwrap_or_default(),
        headers: open_headers(sealer, &row.id, row.headers.as_deref()).map_err(logged("headers")).unwrap_or_default(),
        auth: open_auth(sealer, &row.id, row.auth.as_deref()).map_err(logged("auth")).unwrap_or_default(),
    }
}

/// The audit's account of the headers (their names) and credentials (what is not secret).
pub fn audit_headers(headers: Option<&ExtraHeaders>) -> Value {
    json!(headers.map(ExtraHeaders::names))
}

pub fn audit_auth(auth: Option<&DeliveryAuth>) -> Value {
    auth.map_or(Value::Null, DeliveryAuth::public_json)
}
