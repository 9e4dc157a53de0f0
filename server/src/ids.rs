//! Opaque prefixed ids (`msg_01J…`), API tokens, and their hashes.

use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use domain::ids::PrefixedId;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// A new id: the prefix, then a ULID, so ids sort by creation time. Within
/// this process ids are strictly increasing, even in the same millisecond,
/// which keeps "newest first" lists in publish order.
pub fn new_id(prefix: &str) -> String {
    static GENERATOR: Mutex<ulid::Generator> = Mutex::new(ulid::Generator::new());
    // Not `unwrap_or_default`: the default ULID is the nil one, and a fresh random one is meant.
    #[allow(clippy::unwrap_or_default)]
    let ulid = GENERATOR.lock().ok().and_then(|mut g| g.generate().ok()).unwrap_or_else(ulid::Ulid::new);
    let mut text = [0u8; ulid::ULID_LEN];
    let mut id = String::with_capacity(prefix.len() + 1 + ulid::ULID_LEN);
    id.push_str(prefix);
    id.push('_');
    id.push_str(ulid.array_to_str(&mut text));
    id
}

/// A new id of its kind (`ids::new::<MessageId>()`).
pub fn new<Id: PrefixedId>() -> Id {
    Id::from(new_id(Id::PREFIX))
}

/// How much later than the creation time stored beside it an id may begin: a row's time is read
/// from the clock first and its id made after, within the same write. An id made before `t + this`
/// is all a filter "created before `t`" needs to read.
pub const ID_AFTER_CREATION_MS: i64 = 1_000;

/// The smallest id with this prefix made at `ms` (unix milliseconds): every id
/// made before then sorts below it.
pub fn first_id_at(prefix: &str, ms: i64) -> String {
    format!("{prefix}_{}", ulid::Ulid::from_parts(ms.max(0) as u64, 0))
}

/// The 128 bits of an id's ULID (`msg_01J…`): the traces of `domain::trace` are named by them.
pub fn id_bits(id: &str) -> Option<[u8; 16]> {
    let (_, ulid) = id.split_once('_')?;
    ulid::Ulid::from_string(ulid).ok().map(|u| u.to_bytes())
}

/// When an id was made (unix milliseconds): its ULID's first 48 bits.
pub fn made_at(id: &str) -> Option<i64> {
    id_bits(id).map(|bits| ulid::Ulid::from_bytes(bits).timestamp_ms() as i64)
}

pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}

/// A new API key: `hk_` and 32 random bytes.
pub fn new_api_token() -> String {
    format!("hk_{}", URL_SAFE_NO_PAD.encode(random_bytes::<32>()))
}

/// A new portal link's token: `hp_` and 32 random bytes.
pub fn new_portal_token() -> String {
    format!("hp_{}", URL_SAFE_NO_PAD.encode(random_bytes::<32>()))
}

/// Tokens carry 256 bits of randomness, so a plain SHA-256 is enough to store
/// them safely and find them by hash in one indexed lookup.
pub fn token_hash(token: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_and_unique() {
        let a = new_id("msg");
        assert!(a.starts_with("msg_") && a.len() == 30);
        assert!(a < new_id("msg"), "later ids sort after earlier ones");
    }

    #[test]
    fn ids_made_before_a_time_sort_below_its_first_id() {
        let before = new_id("msg");
        let now = chrono::Utc::now().timestamp_millis();
        assert!(before < first_id_at("msg", now + 1));
        assert!(first_id_at("msg", now - 1000) < before);
        assert_eq!(made_at(&first_id_at("evt", now)), Some(now));
        assert!(made_at(&before).is_some_and(|ms| (now - 1000..=now).contains(&ms)));
        assert_eq!(made_at("msg"), None);
    }

    #[test]
    fn tokens_hash_stably_and_differ() {
        let t = new_api_token();
        assert_eq!(token_hash(&t), token_hash(&t));
        assert_ne!(t, new_api_token());
        assert!(!token_hash(&t).contains(&t));
    }
}
