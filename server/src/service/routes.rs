//! Each customer's routing, kept between publishes: its active subscriptions
//! with their endpoints, and the routing version they were read at. A publish
//! routes with what is kept here and its write checks, in the same statement
//! or transaction, that the versions and the endpoints' states are unchanged
//! (see [`crate::store::events::Routed`]); when they changed, the customers are
//! read again and the batch is routed anew. So a publish needs no read of its
//! own, yet never stores messages for a subscription as it was before a change
//! committed ahead of it, whichever process made the change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sea_orm::{ConnectionTrait, DbErr};

use crate::store::entities::{endpoint, subscription};
use crate::store::events::{Routed, RoutedCustomer, RoutedEndpoint};
use crate::store::subscriptions;

/// Past this many customers the cache starts over, so it cannot grow without bound.
const MAX_CUSTOMERS: usize = 10_000;

/// A subscription an event may be sent through, with its endpoint (`None`
/// only if the endpoint row is missing).
pub type Target = (subscription::Model, Option<endpoint::Model>);

/// One customer's routing as read at `version` (`None`: no such customer,
/// nothing to check and nothing kept).
pub struct Route {
    pub customer_id: String,
    pub version: Option<i64>,
    pub targets: Vec<Target>,
}

#[derive(Default)]
pub struct Routes {
    known: Mutex<HashMap<String, Arc<Route>>>,
}

impl Routes {
    /// The routes of `customer_ids`, reading those not kept yet.
    pub async fn of(&self, db: &impl ConnectionTrait, customer_ids: &[String]) -> Result<Vec<Arc<Route>>, DbErr> {
        let (mut routes, missing) = {
            let known = self.known.lock().expect("routes lock");
            let mut routes = Vec::with_capacity(customer_ids.len());
            let mut missing = Vec::new();
            for id in customer_ids {
                match known.get(id) {
                    Some(route) => routes.push(route.clone()),
                    None => missing.push(id.clone()),
                }
            }
            (routes, missing)
        };
        if missing.is_empty() {
            return Ok(routes);
        }
        // The versions first: a change committed between the two reads leaves an older version
        // beside newer subscriptions, which the write's check refuses, never the reverse.
        let versions = subscriptions::routing_versions(db, &missing).await?;
        let mut targets: HashMap<String, Vec<Target>> = HashMap::new();
        for target in subscriptions::active_with_endpoints(db, &missing).await? {
            targets.entry(target.0.customer_id.clone()).or_default().push(target);
        }
        let read: Vec<Arc<Route>> = missing
            .into_iter()
            .map(|id| {
                let targets = targets.remove(&id).unwrap_or_default();
                Arc::new(Route { version: versions.get(&id).copied(), customer_id: id, targets })
            })
            .collect();
        let mut known = self.known.lock().expect("routes lock");
        if known.len() + read.len() > MAX_CUSTOMERS {
            known.clear();
        }
        for route in &read {
            if route.version.is_some() {
                known.insert(route.customer_id.clone(), route.clone());
            }
        }
        routes.extend(read);
        Ok(routes)
    }

    /// Drops what is kept of these customers: their routing changed.
    pub fn forget(&self, customer_ids: &[String]) {
        let mut known = self.known.lock().expect("routes lock");
        for id in customer_ids {
            known.remove(id);
        }
    }
}

/// What a batch routed with `routes` must find unchanged when it is written.
pub fn routed_by(routes: &[Arc<Route>]) -> Routed {
    let mut routed = Routed::default();
    for route in routes {
        if let Some(version) = route.version {
            routed.customers.push(RoutedCustomer { id: route.customer_id.clone(), routing_version: version });
        }
        for endpoint in route.targets.iter().filter_map(|(_, e)| e.as_ref()) {
            routed.endpoints.push(RoutedEndpoint { id: endpoint.id.clone(), state: endpoint.state.clone() });
        }
    }
    routed.endpoints.sort_by(|a, b| a.id.cmp(&b.id));
    routed.endpoints.dedup_by(|a, b| a.id == b.id);
    routed
}
