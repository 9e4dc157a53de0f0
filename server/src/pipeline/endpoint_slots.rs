//! Attempts in flight per endpoint, so that one slow receiver holds at most
//! `endpoint_concurrency` workers and the claim passes over it while it does.

use std::sync::{Arc, Mutex};

use foldhash::HashMap;

#[derive(Clone, Default)]
pub struct EndpointSlots {
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
    limit: usize,
}

/// One attempt's place at an endpoint; freed when dropped.
pub struct Slot {
    slots: EndpointSlots,
    endpoint_id: String,
}

impl EndpointSlots {
    pub fn new(limit: usize) -> EndpointSlots {
        EndpointSlots { in_flight: Arc::default(), limit }
    }

    /// Endpoints with no room left, for the claim to skip.
    pub fn full(&self) -> Vec<String> {
        let map = self.in_flight.lock().expect("slots lock");
        map.iter().filter(|(_, n)| **n >= self.limit).map(|(id, _)| id.clone()).collect()
    }

    pub fn try_take(&self, endpoint_id: &str) -> Option<Slot> {
        let mut map = self.in_flight.lock().expect("slots lock");
        let count = map.entry(endpoint_id.to_string()).or_default();
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(Slot { slots: self.clone(), endpoint_id: endpoint_id.to_string() })
    }
}

impl Slot {
    /// Frees the place; true when the endpoint was full, so that the lanes,
    /// which passed over it, should look again.
    pub fn release(self) -> bool {
        let map = self.slots.in_flight.lock().expect("slots lock");
        map.get(&self.endpoint_id).is_some_and(|n| *n >= self.slots.limit)
        // The count itself goes down in Drop.
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut map = self.slots.in_flight.lock().expect("slots lock");
        if let Some(count) = map.get_mut(&self.endpoint_id) {
            *count -= 1;
            if *count == 0 {
                map.remove(&self.endpoint_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_full_at_its_limit_and_frees_a_slot_on_drop() {
        let slots = EndpointSlots::new(2);
        let a = slots.try_take("ep_a").unwrap();
        let b = slots.try_take("ep_a").unwrap();
        assert!(slots.try_take("ep_a").is_none());
        assert_eq!(slots.full(), vec!["ep_a".to_string()]);
        assert!(slots.try_take("ep_b").is_some());
        assert!(a.release(), "releasing a full endpoint's slot says so");
        assert!(slots.full().is_empty());
        drop(b);
        assert!(!slots.try_take("ep_a").unwrap().release(), "one of two taken is not full");
        assert!(slots.try_take("ep_a").is_some());
    }
}
