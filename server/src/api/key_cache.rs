//! API keys seen recently, so that a publish does not read the key table on
//! every request. An entry lives a second: a key revoked through this process
//! is forgotten at once, and one revoked through another process sharing the
//! database (or removed by hand) stops working within that second. At any
//! rate of requests that is one read of the key per second.

use std::time::{Duration, Instant};

use quick_cache::sync::Cache;

use crate::service::Principal;

const TTL: Duration = Duration::from_secs(1);
/// Keys kept at most (about: the cache rounds its shards' share up).
const MAX_ENTRIES: usize = 10_000;

pub struct KeyCache {
    entries: Cache<String, (Principal, Instant)>,
}

impl Default for KeyCache {
    fn default() -> KeyCache {
        KeyCache { entries: Cache::new(MAX_ENTRIES) }
    }
}

impl KeyCache {
    /// The customer whose key has this token hash, if seen within the last
    /// second, or at any time before when `stale` (the database is away).
    pub fn get(&self, token_hash: &str, now: Instant, stale: bool) -> Option<Principal> {
        self.entries.get(token_hash).filter(|(_, at)| stale || now.duration_since(*at) < TTL).map(|(key, _)| key)
    }

    /// Forgets a revoked key.
    pub fn forget(&self, token_hash: &str) {
        self.entries.remove(token_hash);
    }

    pub fn put(&self, token_hash: String, key: Principal, now: Instant) {
        self.entries.insert(token_hash, (key, now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_served_for_a_second_then_read_again() {
        let cache = KeyCache::default();
        let t0 = Instant::now();
        let key = Principal::Customer { customer_id: "cus_1".into(), actor: "key_1".into() };
        assert_eq!(cache.get("h", t0, false), None);
        cache.put("h".into(), key.clone(), t0);
        assert_eq!(cache.get("h", t0 + Duration::from_millis(999), false), Some(key.clone()));
        assert_eq!(cache.get("h", t0 + TTL, false), None);
        assert!(cache.get("h", t0 + TTL * 100, true).is_some(), "kept while the database is away");
        assert_eq!(cache.get("other", t0, false), None);
        cache.put("h".into(), key, t0);
        cache.forget("h");
        assert_eq!(cache.get("h", t0, false), None, "a revoked key is forgotten at once");
    }

    #[test]
    fn unknown_tokens_cannot_grow_it_past_its_bound() {
        let cache = KeyCache::default();
        let t0 = Instant::now();
        for i in 0..2 * MAX_ENTRIES {
            cache.put(format!("h{i}"), Principal::Customer { customer_id: "c".into(), actor: "k".into() }, t0);
        }
        assert!(cache.entries.len() as u64 <= cache.entries.capacity());
        assert!(cache.entries.capacity() < (MAX_ENTRIES + MAX_ENTRIES / 8) as u64);
    }
}
