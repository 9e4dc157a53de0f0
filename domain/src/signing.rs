//! Standard Webhooks signatures: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const SECRET_PREFIX: &str = "whsec_";

/// A new signing secret from 32 random bytes chosen by the caller.
pub fn secret_from_bytes(bytes: [u8; 32]) -> String {
    format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes))
}

/// The key bytes of a `whsec_…` secret; `None` when it is not one.
fn secret_key(secret: &str) -> Option<Vec<u8>> {
    STANDARD.decode(secret.strip_prefix(SECRET_PREFIX)?).ok()
}

/// A secret ready to sign with: HMAC's padded key blocks are hashed once here,
/// not again for every request.
#[derive(Clone)]
pub struct SigningKey(Hmac<Sha256>);

impl SigningKey {
    /// `None` when `secret` is not a `whsec_…` secret.
    pub fn from_secret(secret: &str) -> Option<SigningKey> {
        let key = secret_key(secret)?;
        Some(SigningKey(Hmac::new_from_slice(&key).expect("HMAC accepts keys of any length")))
    }

    /// One `v1,…` signature of a request body.
    pub fn sign(&self, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = self.0.clone();
        mac.update(msg_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        let mut signature = String::from("v1,");
        STANDARD.encode_string(mac.finalize().into_bytes(), &mut signature);
        signature
    }
}

/// The `webhook-signature` header: one signature per key still valid, space-separated.
pub fn signature_header<'a>(
    keys: impl IntoIterator<Item = &'a SigningKey>,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> String {
    keys.into_iter().map(|key| key.sign(msg_id, timestamp, body)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example from the Standard Webhooks specification's reference tests.
    #[test]
    fn matches_the_standard_webhooks_reference_vector() {
        let key = SigningKey::from_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            key.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_rotation_sends_one_signature_per_key() {
        let old = SigningKey::from_secret(&secret_from_bytes([1; 32])).unwrap();
        let new = SigningKey::from_secret(&secret_from_bytes([2; 32])).unwrap();
        let header = signature_header([&new, &old], "msg_1", 10, b"{}");
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts, vec![new.sign("msg_1", 10, b"{}"), old.sign("msg_1", 10, b"{}")]);
        assert!(SigningKey::from_secret("nope").is_none());
    }
}
