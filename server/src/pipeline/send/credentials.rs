//! Subscriptions' sealed secrets, opened once: the signing keys, the extra headers and the
//! receiver's credentials. Opening a sealed value (AES-GCM) and keying HMAC or Ed25519 cost more
//! than signing a small body, and these change only when the subscription does: a change stores
//! new sealed values, which are opened when first seen (and an OAuth 2.0 token kept for the old
//! credentials goes with them).

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use domain::ids::SubscriptionId;
use domain::request::DeliveryAuth;
use domain::signing::SigningKey;
use quick_cache::sync::Cache;
use reqwest::header::{HeaderName, HeaderValue};

use super::oauth::OAuthClient;
use crate::secrets::Sealer;
use crate::store::entities::subscription;
use crate::subscription_secrets::{open_auth, open_headers};

/// Subscriptions whose secrets are kept at most.
const MAX_ENTRIES: usize = 10_000;

/// One sealed secret and what it opened to; `None` when it did not open.
struct Opened {
    sealed: String,
    key: Option<SigningKey>,
}

/// How a request to the receiver is authenticated.
pub enum Authorization {
    None,
    /// A header value ready to send (bearer or basic), marked sensitive.
    Header(HeaderValue),
    /// A token fetched and kept by the OAuth 2.0 client.
    OAuth2(OAuthClient),
}

/// A subscription's secrets as last seen: the current signing key, the previous one during a
/// rotation, the extra headers and the credentials, with the sealed values they came from.
struct Secrets {
    current: Opened,
    previous: Option<Opened>,
    sealed_headers: Option<String>,
    headers: Vec<(HeaderName, HeaderValue)>,
    sealed_auth: Option<String>,
    authorization: Authorization,
}

impl Secrets {
    fn matches(&self, sub: &subscription::Model) -> bool {
        let previous = self.previous.as_ref().map(|p| p.sealed.as_str());
        self.current.sealed == sub.secret
            && previous == sub.previous_secret.as_deref()
            && self.sealed_headers == sub.headers
            && self.sealed_auth == sub.auth
    }
}

pub struct Credentials {
    sealer: Arc<Sealer>,
    by_subscription: Cache<SubscriptionId, Arc<Secrets>>,
}

/// What a request to one subscription is signed and sent with: the keys (the current secret's,
/// then the previous one's while it is valid), the extra headers, and the credentials.
pub struct Keys {
    secrets: Arc<Secrets>,
    with_previous: bool,
}

impl Keys {
    pub fn iter(&self) -> impl Iterator<Item = &SigningKey> {
        let previous = self.secrets.previous.as_ref().filter(|_| self.with_previous);
        std::iter::once(&self.secrets.current).chain(previous).filter_map(|opened| opened.key.as_ref())
    }

    /// The extra headers, their values marked sensitive (masked in the attempt's record).
    pub fn headers(&self) -> &[(HeaderName, HeaderValue)] {
        &self.secrets.headers
    }

    pub fn authorization(&self) -> &Authorization {
        &self.secrets.authorization
    }
}

impl Credentials {
    pub fn new(sealer: Arc<Sealer>) -> Credentials {
        Credentials { sealer, by_subscription: Cache::new(MAX_ENTRIES) }
    }

    /// Every secret of `sub` still valid at `now_ms`, opened.
    pub fn of(&self, sub: &subscription::Model, now_ms: i64) -> Keys {
        let with_previous = sub.previous_secret_expires_at.is_some_and(|until| until > now_ms);
        // Opened once even when many deliveries of a new subscription start at once (the others
        // wait for it), so that they share one OAuth 2.0 token.
        let opened = self.by_subscription.get_or_insert_with(&sub.id, || Ok::<_, ()>(Arc::new(self.open_all(sub))));
        let secrets = match opened {
            Ok(secrets) if secrets.matches(sub) => secrets,
            _ => {
                let secrets = Arc::new(self.open_all(sub));
                self.by_subscription.insert(sub.id.clone(), secrets.clone());
                secrets
            }
        };
        if secrets.current.key.is_none() {
            tracing::error!(subscription_id = %sub.id, "the signing secret did not open; the request goes unsigned");
        }
        Keys { secrets, with_previous }
    }

    fn open_all(&self, sub: &subscription::Model) -> Secrets {
        Secrets {
            current: self.open(sub, &sub.secret),
            previous: sub.previous_secret.as_deref().map(|sealed| self.open(sub, sealed)),
            sealed_headers: sub.headers.clone(),
            headers: self.open_headers(sub),
            sealed_auth: sub.auth.clone(),
            authorization: self.open_auth(sub),
        }
    }

    fn open(&self, sub: &subscription::Model, sealed: &str) -> Opened {
        let key = match self.sealer.open(sealed, &sub.id) {
            Ok(secret) => SigningKey::from_secret(&secret),
            Err(e) => {
                tracing::error!(subscription_id = %sub.id, error = %e, "a signing secret did not open");
                None
            }
        };
        Opened { sealed: sealed.to_string(), key }
    }

    /// The extra headers ready to send; none when they did not open (logged).
    fn open_headers(&self, sub: &subscription::Model) -> Vec<(HeaderName, HeaderValue)> {
        let headers = open_headers(&self.sealer, &sub.id, sub.headers.as_deref()).unwrap_or_else(|e| {
            tracing::error!(subscription_id = %sub.id, error = %e, "the extra headers did not open; none are sent");
            Default::default()
        });
        let ready = headers.0.iter().filter_map(|(name, value)| {
            Some((HeaderName::from_bytes(name.as_bytes()).ok()?, sensitive(value.as_bytes())?))
        });
        ready.collect()
    }

    /// The credentials ready to send; none when they did not open (logged), and the receiver's
    /// answer will say so.
    fn open_auth(&self, sub: &subscription::Model) -> Authorization {
        let auth = open_auth(&self.sealer, &sub.id, sub.auth.as_deref()).unwrap_or_else(|e| {
            tracing::error!(subscription_id = %sub.id, error = %e, "the credentials did not open; none are sent");
            None
        });
        let header = |text: String| sensitive(text.as_bytes()).map_or(Authorization::None, Authorization::Header);
        match auth {
            None => Authorization::None,
            Some(DeliveryAuth::Bearer { token }) => header(format!("Bearer {token}")),
            Some(DeliveryAuth::Basic { username, password }) => {
                header(format!("Basic {}", STANDARD.encode(format!("{username}:{password}"))))
            }
            Some(DeliveryAuth::OAuth2 { token_url, client_id, client_secret, scope }) => {
                Authorization::OAuth2(OAuthClient::new(&token_url, &client_id, &client_secret, scope.as_deref()))
            }
        }
    }
}

/// A header value that is never shown: masked in the attempt's record.
pub fn sensitive(bytes: &[u8]) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_bytes(bytes).ok()?;
    value.set_sensitive(true);
    Some(value)
}

#[cfg(test)]
mod tests {
    use domain::signing::{SigningKey, secret_from_bytes};

    use domain::states::{ContentMode, SignatureScheme, SubscriptionStatus};

    use super::*;
    use crate::secrets::SecretKey;

    fn subscription(sealer: &Sealer, secret: &str) -> subscription::Model {
        subscription::Model {
            id: "sub_1".into(),
            customer_id: "cus_1".into(),
            name: "s".into(),
            url: "http://127.0.0.1:1/hook".into(),
            endpoint_id: "ep_1".into(),
            event_types: "[\"*\"]".into(),
            retry_policy: "{}".into(),
            timeout_ms: 1000,
            content_mode: ContentMode::Structured,
            status: SubscriptionStatus::Active,
            secret: sealer.seal(secret, "sub_1"),
            previous_secret: None,
            previous_secret_expires_at: None,
            filter: None,
            headers: None,
            auth: None,
            signature: SignatureScheme::V1,
            rate_limit_per_sec: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    fn signatures(keys: &Keys) -> Vec<String> {
        keys.iter().map(|key| key.sign("msg_1", 1, b"{}")).collect()
    }

    fn sign_with(secret: &str) -> String {
        SigningKey::from_secret(secret).unwrap().sign("msg_1", 1, b"{}")
    }

    #[test]
    fn a_rotation_is_seen_at_once_and_the_previous_secret_only_while_valid() {
        let sealer = Arc::new(Sealer::new(&SecretKey::generate()));
        let keys = Credentials::new(sealer.clone());
        let (first, second) = (secret_from_bytes([1; 32]), secret_from_bytes([2; 32]));
        let mut sub = subscription(&sealer, &first);
        assert_eq!(signatures(&keys.of(&sub, 0)), vec![sign_with(&first)]);

        // Rotated: the new sealed values replace what was opened for this subscription.
        sub.previous_secret = Some(sub.secret.clone());
        sub.secret = sealer.seal(&second, "sub_1");
        sub.previous_secret_expires_at = Some(100);
        assert_eq!(signatures(&keys.of(&sub, 99)), vec![sign_with(&second), sign_with(&first)]);
        assert_eq!(signatures(&keys.of(&sub, 100)), vec![sign_with(&second)]);
    }

    #[test]
    fn a_secret_sealed_for_another_row_signs_nothing() {
        let sealer = Arc::new(Sealer::new(&SecretKey::generate()));
        let keys = Credentials::new(sealer.clone());
        let mut sub = subscription(&sealer, &secret_from_bytes([1; 32]));
        sub.secret = sealer.seal(&secret_from_bytes([1; 32]), "sub_2");
        assert!(signatures(&keys.of(&sub, 0)).is_empty());
    }

    #[test]
    fn headers_and_credentials_are_sensitive_and_follow_the_row() {
        use domain::request::{DeliveryAuth, ExtraHeaders};

        use crate::subscription_secrets::{seal_auth, seal_headers};

        let sealer = Arc::new(Sealer::new(&SecretKey::generate()));
        let credentials = Credentials::new(sealer.clone());
        let mut sub = subscription(&sealer, &secret_from_bytes([1; 32]));
        let headers = ExtraHeaders(vec![("X-Api-Key".into(), "k".into())]);
        sub.headers = seal_headers(&sealer, &sub.id, &headers);
        sub.auth = Some(seal_auth(&sealer, &sub.id, &DeliveryAuth::Bearer { token: "t".into() }));
        let keys = credentials.of(&sub, 0);
        let (name, value) = &keys.headers()[0];
        assert_eq!((name.as_str(), value.to_str().unwrap(), value.is_sensitive()), ("x-api-key", "k", true));
        let Authorization::Header(bearer) = keys.authorization() else { panic!("a bearer header") };
        assert_eq!((bearer.to_str().unwrap(), bearer.is_sensitive()), ("Bearer t", true));

        // Changed credentials are new sealed values, opened when first seen.
        let basic = DeliveryAuth::Basic { username: "u".into(), password: "p".into() };
        sub.auth = Some(seal_auth(&sealer, &sub.id, &basic));
        let keys = credentials.of(&sub, 0);
        let Authorization::Header(basic) = keys.authorization() else { panic!("a basic header") };
        assert_eq!(basic.to_str().unwrap(), "Basic dTpw");
        sub.auth = None;
        assert!(matches!(credentials.of(&sub, 0).authorization(), Authorization::None));
    }
}
