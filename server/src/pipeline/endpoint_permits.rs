//! Each endpoint's concurrency permits: at most `endpoint_concurrency`
//! attempts in flight per endpoint, so that one slow receiver holds at most that
//! many workers, and the claim passes over it while it does.

use std::sync::{Arc, Mutex};

use domain::ids::EndpointId;
use foldhash::HashMap;

#[derive(Clone, Default)]
pub struct EndpointPermits {
    in_flight: Arc<Mutex<HashMap<EndpointId, usize>>>,
    limit: usize,
}

/// One attempt's permit at its endpoint; given back when dropped.
pub struct EndpointPermit {
    permits: EndpointPermits,
    endpoint_id: EndpointId,
}

impl EndpointPermits {
    pub fn new(limit: usize) -> EndpointPermits {
        EndpointPermits { in_flight: Arc::default(), limit }
    }

    /// Endpoints with every permit taken, for the claim to pass over.
    pub fn at_limit(&self) -> Vec<EndpointId> {
        let map = self.in_flight.lock().expect("permits lock");
        map.iter().filter(|(_, n)| **n >= self.limit).map(|(id, _)| id.clone()).collect()
    }

    pub fn try_acquire(&self, endpoint_id: &EndpointId) -> Option<EndpointPermit> {
        let mut map = self.in_flight.lock().expect("permits lock");
        let count = map.entry(endpoint_id.clone()).or_default();
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(EndpointPermit { permits: self.clone(), endpoint_id: endpoint_id.clone() })
    }
}

impl EndpointPermit {
    /// Gives the permit back; true when the endpoint was at its limit, so that
    /// the lanes, which passed over it, should claim for it again.
    pub fn release(self) -> bool {
        let map = self.permits.in_flight.lock().expect("permits lock");
        map.get(&self.endpoint_id).is_some_and(|n| *n >= self.permits.limit)
        // The count itself goes down in Drop.
    }
}

impl Drop for EndpointPermit {
    fn drop(&mut self) {
        let mut map = self.permits.in_flight.lock().expect("permits lock");
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
    fn an_endpoint_is_at_its_limit_until_a_permit_is_dropped() {
        let permits = EndpointPermits::new(2);
        let a = permits.try_acquire(&"ep_a".into()).unwrap();
        let b = permits.try_acquire(&"ep_a".into()).unwrap();
        assert!(permits.try_acquire(&"ep_a".into()).is_none());
        assert_eq!(permits.at_limit(), vec!["ep_a".to_string()]);
        assert!(permits.try_acquire(&"ep_b".into()).is_some());
        assert!(a.release(), "releasing a permit of an endpoint at its limit says so");
        assert!(permits.at_limit().is_empty());
        drop(b);
        assert!(!permits.try_acquire(&"ep_a".into()).unwrap().release(), "one of two taken is below the limit");
        assert!(permits.try_acquire(&"ep_a".into()).is_some());
    }
}
