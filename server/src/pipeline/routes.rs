//! Each customer's routing, kept between publishes: its active and paused subscriptions
//! with their endpoints, and the routing version they were read at. A publish
//! routes with what is kept here and its write checks, in the same statement
//! or transaction, that the versions and the endpoints' states are unchanged
//! (see [`crate::store::events::Routed`]); when they changed, the customers are
//! read again and the batch is routed anew. So a publish needs no read of its
//! own, yet never stores messages for a subscription as it was before a change
//! committed ahead of it, whichever process made the change.

use std::sync::Arc;

use domain::ids::CustomerId;
use foldhash::{HashMap, HashMapExt};
use quick_cache::sync::Cache;
use sea_orm::{ConnectionTrait, DbErr};

use domain::data_schema::DataSchema;
use domain::event::CloudEvent;
use domain::filter::{Filter, Message};
use domain::operational::type_matches;
use domain::policy::RetryPolicy;

use crate::store::entities::{endpoint, event_type, subscription};
use crate::store::event_types;
use crate::store::events::{Routed, RoutedCustomer, RoutedEndpoint};
use crate::store::subscriptions::{self, policy_of};

/// Customers whose routing is kept at most.
const MAX_CUSTOMERS: usize = 10_000;

/// A subscription an event may be sent through, with its endpoint (`None`
/// only if the endpoint row is missing), read once for every publish that
/// routes with it: its event types and retry policy parsed, the rows shared
/// with the messages handed to the lane.
pub struct RoutedSubscription {
    pub subscription: Arc<subscription::Model>,
    pub endpoint: Option<Arc<endpoint::Model>>,
    pub policy: Arc<RetryPolicy>,
    event_types: Vec<String>,
    filter: Option<StoredFilter>,
}

impl RoutedSubscription {
    pub fn new(subscription: subscription::Model, endpoint: Option<endpoint::Model>) -> RoutedSubscription {
        RoutedSubscription {
            event_types: subscriptions::event_types(&subscription.event_types),
            filter: subscription.filter.as_deref().map(StoredFilter::compile),
            policy: policy_of(&subscription),
            subscription: Arc::new(subscription),
            endpoint: endpoint.map(Arc::new),
        }
    }

    /// Whether events of this type go to the subscription.
    pub fn accepts(&self, event_type: &str) -> bool {
        self.event_types.iter().any(|t| type_matches(t, event_type))
    }

    /// Whether the subscription's filter, if it has one, lets this event through; `message` is the
    /// event as filters see it, made once per event at the first filter that needs it.
    pub fn passes(&self, event: &CloudEvent, message: &mut Option<Message>) -> bool {
        let Some(filter) = &self.filter else { return true };
        filter.matches(message.get_or_insert_with(|| Message::of(event)))
    }
}

/// A stored filter, compiled once per subscription and routing version. One that no longer
/// compiles (it was accepted by another version of Herald) matches nothing and counts as failing.
pub enum StoredFilter {
    Compiled(Filter),
    Broken,
}

impl StoredFilter {
    pub fn compile(source: &str) -> StoredFilter {
        match Filter::compile(source) {
            Ok(filter) => StoredFilter::Compiled(filter),
            Err(error) => {
                tracing::warn!(%error, "a stored filter does not compile; it matches no event");
                StoredFilter::Broken
            }
        }
    }

    /// Whether the event matches; a filter that fails on it does not, and is counted.
    pub fn matches(&self, message: &Message) -> bool {
        let matched = match self {
            StoredFilter::Compiled(filter) => filter.matches(message).ok(),
            StoredFilter::Broken => None,
        };
        matched.unwrap_or_else(|| {
            crate::telemetry::hot().filter_errors.increment(1);
            false
        })
    }
}

/// One customer's routing as read at `version` (`None`: no such customer,
/// nothing to check and nothing kept).
pub struct Route {
    pub customer_id: CustomerId,
    pub version: Option<i64>,
    pub subscriptions: Vec<RoutedSubscription>,
    /// The schemas of the customer's catalog, by type: a published event's data is checked first.
    pub schemas: HashMap<String, DataSchema>,
}

pub struct Routes {
    known: Cache<CustomerId, Arc<Route>>,
}

impl Default for Routes {
    fn default() -> Routes {
        Routes { known: Cache::new(MAX_CUSTOMERS) }
    }
}

impl Routes {
    /// The routes of `customer_ids`, reading those not kept yet.
    pub async fn of(&self, db: &impl ConnectionTrait, customer_ids: &[CustomerId]) -> Result<Vec<Arc<Route>>, DbErr> {
        let mut routes = Vec::with_capacity(customer_ids.len());
        let mut missing = Vec::new();
        for id in customer_ids {
            match self.known.get(id) {
                Some(route) => routes.push(route),
                None => missing.push(id.clone()),
            }
        }
        if missing.is_empty() {
            return Ok(routes);
        }
        // The versions first: a change committed between the two reads leaves an older version
        // beside newer subscriptions, which the write's check refuses, never the reverse.
        let versions = subscriptions::routing_versions(db, &missing).await?;
        let subscription_rows = subscriptions::routable_with_endpoints(db, &missing).await?;
        let schema_rows = event_types::with_schemas(db, &missing).await?;
        let read = compiled_apart(missing, versions, subscription_rows, schema_rows).await;
        for route in &read {
            if route.version.is_some() {
                self.known.insert(route.customer_id.clone(), route.clone());
            }
        }
        routes.extend(read);
        Ok(routes)
    }

    /// Drops what is kept of these customers: their routing changed.
    pub fn forget(&self, customer_ids: &[CustomerId]) {
        for id in customer_ids {
            self.known.remove(id);
        }
    }
}

/// [`compiled`] on a blocking thread. Filters and schemas are the customers' own and may take long
/// to compile; meanwhile the intake's worker thread, and the tasks queued on it, are not held up.
async fn compiled_apart(
    customer_ids: Vec<CustomerId>,
    versions: std::collections::HashMap<CustomerId, i64>,
    subscriptions: Vec<(subscription::Model, Option<endpoint::Model>)>,
    schemas: Vec<event_type::Model>,
) -> Vec<Arc<Route>> {
    tokio::task::spawn_blocking(move || compiled(customer_ids, &versions, subscriptions, schemas))
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// The routes of `customer_ids` from their rows, with their filters and schemas compiled.
fn compiled(
    customer_ids: Vec<CustomerId>,
    versions: &std::collections::HashMap<CustomerId, i64>,
    subscriptions: Vec<(subscription::Model, Option<endpoint::Model>)>,
    schemas: Vec<event_type::Model>,
) -> Vec<Arc<Route>> {
    let mut routed: HashMap<CustomerId, Vec<RoutedSubscription>> = HashMap::new();
    for (subscription, endpoint) in subscriptions {
        let routed_subscription = RoutedSubscription::new(subscription, endpoint);
        routed.entry(routed_subscription.subscription.customer_id.clone()).or_default().push(routed_subscription);
    }
    let mut schemas = schemas_of(schemas);
    customer_ids
        .into_iter()
        .map(|id| {
            let subscriptions = routed.remove(&id).unwrap_or_default();
            let schemas = schemas.remove(&id).unwrap_or_default();
            Arc::new(Route { version: versions.get(&id).copied(), customer_id: id, subscriptions, schemas })
        })
        .collect()
}

/// The compiled schemas of these catalog rows, by customer. One that no longer compiles (it was
/// accepted by another version of Herald) checks nothing.
fn schemas_of(rows: Vec<event_type::Model>) -> HashMap<CustomerId, HashMap<String, DataSchema>> {
    let mut schemas: HashMap<CustomerId, HashMap<String, DataSchema>> = HashMap::new();
    for row in rows {
        let document = row.schema.as_deref().and_then(|text| serde_json::from_str(text).ok());
        match document.map(|schema| DataSchema::compile(&schema)) {
            Some(Ok(compiled)) => {
                schemas.entry(row.customer_id).or_default().insert(row.name, compiled);
            }
            _ => tracing::warn!(event_type = %row.name, "a stored schema does not compile; it checks nothing"),
        }
    }
    schemas
}

/// What a batch routed with `routes` must find unchanged when it is written.
pub fn routed_by(routes: &[Arc<Route>]) -> Routed {
    let mut routed = Routed::default();
    for route in routes {
        if let Some(version) = route.version {
            routed.customers.push(RoutedCustomer { id: route.customer_id.clone(), routing_version: version });
        }
        for endpoint in route.subscriptions.iter().filter_map(|s| s.endpoint.as_ref()) {
            routed.endpoints.push(RoutedEndpoint { id: endpoint.id.clone(), state: endpoint.state });
        }
    }
    routed.endpoints.sort_by(|a, b| a.id.cmp(&b.id));
    routed.endpoints.dedup_by(|a, b| a.id == b.id);
    routed
}

#[cfg(test)]
mod tests {
    use domain::states::{ContentMode, SubscriptionStatus};

    use super::*;

    fn subscription(event_types: &str) -> subscription::Model {
        subscription::Model {
            id: "sub_1".into(),
            customer_id: "cus_1".into(),
            name: "s".into(),
            url: "https://example.com/hook".into(),
            endpoint_id: "ep_1".into(),
            event_types: event_types.into(),
            retry_policy: "{}".into(),
            timeout_ms: 5_000,
            content_mode: ContentMode::Structured,
            status: SubscriptionStatus::Active,
            secret: String::new(),
            previous_secret: None,
            previous_secret_expires_at: None,
            filter: None,
            headers: None,
            auth: None,
            signature: domain::states::SignatureScheme::V1,
            rate_limit_per_sec: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    fn event_type(name: &str, schema: &str) -> event_type::Model {
        event_type::Model {
            id: format!("evt_{name}").into(),
            customer_id: "cus_1".into(),
            name: name.into(),
            description: None,
            schema: Some(schema.into()),
            example: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn filters_and_schemas_are_compiled_off_the_async_thread() {
        let mut filtered = subscription(r#"["order.created"]"#);
        filtered.filter = Some("message.data.total > 10".into());
        let versions = [(CustomerId::from("cus_1"), 3)].into_iter().collect();
        let schemas = vec![event_type("order.created", r#"{"type":"object"}"#), event_type("broken", "[1]")];
        // This test's runtime has one thread: had the compiling run on it, the spawned task would
        // have finished within its first poll, before this one resumed.
        let compiling = tokio::spawn(compiled_apart(vec!["cus_1".into()], versions, vec![(filtered, None)], schemas));
        tokio::task::yield_now().await;
        assert!(!compiling.is_finished(), "the compiling ran on the runtime's thread");
        let routes = compiling.await.unwrap();
        let route = &routes[0];
        assert_eq!(route.version, Some(3));
        assert!(matches!(route.subscriptions[0].filter, Some(StoredFilter::Compiled(_))));
        assert_eq!(route.schemas.keys().collect::<Vec<_>>(), ["order.created"], "a broken schema checks nothing");
    }

    #[test]
    fn a_routed_subscription_accepts_the_types_it_lists() {
        let listed = RoutedSubscription::new(subscription(r#"["order.created","order.paid"]"#), None);
        assert!(listed.accepts("order.paid"));
        assert!(!listed.accepts("order.refunded"));
        assert!(RoutedSubscription::new(subscription(r#"["*"]"#), None).accepts("anything"));
        assert!(!RoutedSubscription::new(subscription("not json"), None).accepts("order.paid"));
    }
}
