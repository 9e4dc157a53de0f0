//! Standard Webhooks signatures of `"{id}.{timestamp}.{body}"`: `v1,<base64 HMAC-SHA256>` with a
//! shared `whsec_` secret, or `v1a,<base64 Ed25519>` with a `whsk_` secret key whose public key
//! (`whpk_`) the receiver verifies with.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::Signer;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::states::SignatureScheme;

pub const SECRET_PREFIX: &str = "whsec_";
/// An Ed25519 secret key (its 32-byte seed), which never leaves Herald.
pub const SECRET_KEY_PREFIX: &str = "whsk_";
/// An Ed25519 public key, given to the receiver.
pub const PUBLIC_KEY_PREFIX: &str = "whpk_";

/// A new secret of `scheme` from 32 random bytes chosen by the caller.
pub fn new_secret(scheme: SignatureScheme, bytes: [u8; 32]) -> String {
    let prefix = match scheme {
        SignatureScheme::V1 => SECRET_PREFIX,
        SignatureScheme::V1a => SECRET_KEY_PREFIX,
    };
    format!("{prefix}{}", STANDARD.encode(bytes))
}

/// A new `whsec_` secret from 32 random bytes chosen by the caller.
pub fn secret_from_bytes(bytes: [u8; 32]) -> String {
    new_secret(SignatureScheme::V1, bytes)
}

/// The `whpk_` public key of a `whsk_` secret key; `None` for any other secret.
pub fn public_key(secret: &str) -> Option<String> {
    match SigningKey::from_secret(secret)? {
        SigningKey::Ed25519(key) => Some(format!("{PUBLIC_KEY_PREFIX}{}", STANDARD.encode(key.verifying_key()))),
        SigningKey::Hmac(_) => None,
    }
}

/// A secret ready to sign with: HMAC's padded key blocks are hashed once here, and an Ed25519
/// key expanded once, not again for every request.
#[derive(Clone)]
pub enum SigningKey {
    Hmac(Hmac<Sha256>),
    Ed25519(Box<ed25519_dalek::SigningKey>),
}

impl SigningKey {
    /// `None` when `secret` is neither a `whsec_…` secret nor a `whsk_…` key of 32 bytes.
    pub fn from_secret(secret: &str) -> Option<SigningKey> {
        if let Some(encoded) = secret.strip_prefix(SECRET_PREFIX) {
            let key = STANDARD.decode(encoded).ok()?;
            return Some(SigningKey::Hmac(Hmac::new_from_slice(&key).expect("HMAC accepts keys of any length")));
        }
        let seed: [u8; 32] = STANDARD.decode(secret.strip_prefix(SECRET_KEY_PREFIX)?).ok()?.try_into().ok()?;
        Some(SigningKey::Ed25519(Box::new(ed25519_dalek::SigningKey::from_bytes(&seed))))
    }

    /// One `v1,…` or `v1a,…` signature of a request body.
    pub fn sign(&self, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
        let timestamp = timestamp.to_string();
        match self {
            SigningKey::Hmac(key) => {
                let mut mac = key.clone();
                for part in [msg_id.as_bytes(), b".", timestamp.as_bytes(), b".", body] {
                    mac.update(part);
                }
                let mut signature = String::from("v1,");
                STANDARD.encode_string(mac.finalize().into_bytes(), &mut signature);
                signature
            }
            SigningKey::Ed25519(key) => {
                // Ed25519 hashes its whole message twice, so the parts are joined once here.
                let mut message = Vec::with_capacity(msg_id.len() + timestamp.len() + body.len() + 2);
                for part in [msg_id.as_bytes(), b".", timestamp.as_bytes(), b".", body] {
                    message.extend_from_slice(part);
                }
                let mut signature = String::from("v1a,");
                STANDARD.encode_string(key.sign(&message).to_bytes(), &mut signature);
                signature
            }
        }
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
    use ed25519_dalek::{Signature, Verifier, VerifyingKey};

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
        let new = SigningKey::from_secret(&new_secret(SignatureScheme::V1a, [2; 32])).unwrap();
        let header = signature_header([&new, &old], "msg_1", 10, b"{}");
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts, vec![new.sign("msg_1", 10, b"{}"), old.sign("msg_1", 10, b"{}")]);
        assert!(parts[0].starts_with("v1a,") && parts[1].starts_with("v1,"));
        assert!(SigningKey::from_secret("nope").is_none());
        assert!(SigningKey::from_secret("whsk_AAAA").is_none(), "a secret key is 32 bytes");
    }

    /// RFC 8032's first test vector (the empty message) fixes the key's derivation, and a
    /// signature made here verifies with the public key given to receivers.
    #[test]
    fn v1a_signs_with_ed25519_and_verifies_with_the_public_key() {
        let seed = hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
        let secret = new_secret(SignatureScheme::V1a, seed.try_into().unwrap());
        let public = public_key(&secret).unwrap();
        let encoded = public.strip_prefix(PUBLIC_KEY_PREFIX).unwrap();
        let public_bytes = STANDARD.decode(encoded).unwrap();
        assert_eq!(public_bytes, hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"));
        assert_eq!(public_key(&secret_from_bytes([1; 32])), None, "a shared secret has no public key");

        let signature = SigningKey::from_secret(&secret).unwrap().sign("msg_1", 1614265330, b"{\"a\":1}");
        let bytes = STANDARD.decode(signature.strip_prefix("v1a,").unwrap()).unwrap();
        let verifying = VerifyingKey::from_bytes(&public_bytes.try_into().unwrap()).unwrap();
        let signature = Signature::from_bytes(&bytes.try_into().unwrap());
        assert!(verifying.verify(b"msg_1.1614265330.{\"a\":1}", &signature).is_ok());
        assert!(verifying.verify(b"msg_1.1614265330.{\"a\":2}", &signature).is_err());
    }

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
    }
}
