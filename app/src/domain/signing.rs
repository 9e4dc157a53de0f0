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
pub fn secret_key(secret: &str) -> Option<Vec<u8>> {
    STANDARD.decode(secret.strip_prefix(SECRET_PREFIX)?).ok()
}

/// One `v1,…` signature of a request body.
pub fn sign(key: &[u8], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts keys of any length");
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The `webhook-signature` header: one signature per key still valid, space-separated.
pub fn signature_header<'a>(
    keys: impl IntoIterator<Item = &'a [u8]>,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> String {
    keys.into_iter().map(|key| sign(key, msg_id, timestamp, body)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example from the Standard Webhooks specification's reference tests.
    #[test]
    fn matches_the_standard_webhooks_reference_vector() {
        let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_rotation_sends_one_signature_per_key() {
        let old = secret_key(&secret_from_bytes([1; 32])).unwrap();
        let new = secret_key(&secret_from_bytes([2; 32])).unwrap();
        let header = signature_header([new.as_slice(), old.as_slice()], "msg_1", 10, b"{}");
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts, vec![sign(&new, "msg_1", 10, b"{}"), sign(&old, "msg_1", 10, b"{}")]);
        assert!(secret_key("nope").is_none());
    }
}
