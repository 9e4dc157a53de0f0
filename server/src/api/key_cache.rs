//! API keys seen recently, so that a publish does not read the key table on
//! every request. An entry lives a minute: a key removed from the database
//! (by hand, or by another process) stops working within that time.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use foldhash::HashMap;

const TTL: Duration = Duration::from_secs(60);
/// Past this many keys the cache starts over, so unknown tokens cannot grow it.
const MAX_ENTRIES: usize = 10_000;

/// The key's customer and the key's own id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownKey {
    pub customer_id: String,
    pub key_id: String,
}

#[derive(Default)]
pub struct KeyCache {
    entries: Mutex<HashMap<String, (KnownKey, Instant)>>,
}

impl KeyCache {
    pub fn get(&self, token_hash: &str, now: Instant) -> Option<KnownKey> {
        let entries = self.entries.lock().expect("key cache lock");
        entries.get(token_hash).filter(|(_, at)| now.duration_since(*at) < TTL).map(|(key, _)| key.clone())
    }

    pub fn put(&self, token_hash: String, key: KnownKey, now: Instant) {
        let mut entries = self.entries.lock().expect("key cache lock");
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(token_hash, (key, now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_served_for_a_minute_then_read_again() {
        let cache = KeyCache::default();
        let t0 = Instant::now();
        let key = KnownKey { customer_id: "cus_1".into(), key_id: "key_1".into() };
        assert_eq!(cache.get("h", t0), None);
        cache.put("h".into(), key.clone(), t0);
        assert_eq!(cache.get("h", t0 + Duration::from_secs(59)), Some(key));
        assert_eq!(cache.get("h", t0 + TTL), None);
        assert_eq!(cache.get("other", t0), None);
    }

    #[test]
    fn unknown_tokens_cannot_grow_it_past_its_bound() {
        let cache = KeyCache::default();
        let t0 = Instant::now();
        for i in 0..MAX_ENTRIES + 5 {
            cache.put(format!("h{i}"), KnownKey { customer_id: "c".into(), key_id: "k".into() }, t0);
        }
        assert!(cache.entries.lock().unwrap().len() <= MAX_ENTRIES);
    }
}
