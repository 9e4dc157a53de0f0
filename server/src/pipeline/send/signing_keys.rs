//! Subscriptions' signing secrets, opened once. Opening a sealed secret
//! (AES-GCM) and keying HMAC cost more than signing a small body, and a
//! subscription's secrets change only when it is rotated: a rotation stores
//! new sealed values, which are opened when first seen.

use std::sync::Arc;

use domain::ids::SubscriptionId;
use domain::signing::SigningKey;
use quick_cache::sync::Cache;

use crate::secrets::Sealer;
use crate::store::entities::subscription;

/// Subscriptions whose keys are kept at most.
const MAX_ENTRIES: usize = 10_000;

/// One sealed secret and what it opened to; `None` when it did not open.
struct Opened {
    sealed: String,
    key: Option<SigningKey>,
}

/// A subscription's secrets as last seen: the current one, and the previous one during a rotation.
struct Secrets {
    current: Opened,
    previous: Option<Opened>,
}

impl Secrets {
    fn matches(&self, sub: &subscription::Model) -> bool {
        let previous = self.previous.as_ref().map(|p| p.sealed.as_str());
        self.current.sealed == sub.secret && previous == sub.previous_secret.as_deref()
    }
}

pub struct SigningKeys {
    sealer: Arc<Sealer>,
    by_subscription: Cache<SubscriptionId, Arc<Secrets>>,
}

/// The keys a request is signed with: the current secret's, then the previous one's while it is valid.
pub struct Keys {
    secrets: Arc<Secrets>,
    with_previous: bool,
}

impl Keys {
    pub fn iter(&self) -> impl Iterator<Item = &SigningKey> {
        let previous = self.secrets.previous.as_ref().filter(|_| self.with_previous);
        std::iter::once(&self.secrets.current).chain(previous).filter_map(|opened| opened.key.as_ref())
    }
}

impl SigningKeys {
    pub fn new(sealer: Arc<Sealer>) -> SigningKeys {
        SigningKeys { sealer, by_subscription: Cache::new(MAX_ENTRIES) }
    }

    /// Every secret of `sub` still valid at `now_ms`, opened.
    pub fn of(&self, sub: &subscription::Model, now_ms: i64) -> Keys {
        let with_previous = sub.previous_secret_expires_at.is_some_and(|until| until > now_ms);
        let secrets = match self.by_subscription.get(&sub.id) {
            Some(secrets) if secrets.matches(sub) => secrets,
            _ => {
                let secrets = Arc::new(Secrets {
                    current: self.open(sub, &sub.secret),
                    previous: sub.previous_secret.as_deref().map(|sealed| self.open(sub, sealed)),
                });
                self.by_subscription.insert(sub.id.clone(), secrets.clone());
                secrets
            }
        };
        if secrets.current.key.is_none() {
            tracing::error!(subscription_id = %sub.id, "the signing secret did not open; the request goes unsigned");
        }
        Keys { secrets, with_previous }
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
}

#[cfg(test)]
mod tests {
    use domain::signing::{SigningKey, secret_from_bytes};

    use domain::states::{ContentMode, SubscriptionStatus};

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
        let keys = SigningKeys::new(sealer.clone());
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
        let keys = SigningKeys::new(sealer.clone());
        let mut sub = subscription(&sealer, &secret_from_bytes([1; 32]));
        sub.secret = sealer.seal(&secret_from_bytes([1; 32]), "sub_2");
        assert!(signatures(&keys.of(&sub, 0)).is_empty());
    }
}
