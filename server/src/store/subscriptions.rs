//! Subscriptions: their rows, the active ones of a customer with their endpoints
//! (the publish's routing), and how a stored subscription reads (its event types
//! and retry policy).

use domain::ids::{CustomerId, EndpointId, SubscriptionId};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use domain::policy::RetryPolicy;
use domain::states::SubscriptionStatus;
use quick_cache::sync::Cache;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DbBackend, DbErr, EntityTrait, IntoActiveModel,
    JoinType, QueryFilter, QueryOrder, QuerySelect, Statement,
};

use super::entities::endpoint;
use super::entities::subscription::{self, Column, Entity as Subscriptions};
use super::page::{self, PageRequest};

/// The states of a subscription that events go to (a paused one's messages are held).
const ROUTABLE: [&str; 2] = ["active", "paused"];

pub async fn insert(db: &impl ConnectionTrait, row: subscription::Model) -> Result<(), DbErr> {
    Subscriptions::insert(row.into_active_model().reset_all()).exec_without_returning(db).await.map(|_| ())
}

pub async fn update(db: &impl ConnectionTrait, row: subscription::Model) -> Result<(), DbErr> {
    Subscriptions::update(row.into_active_model().reset_all()).exec(db).await.map(|_| ())
}

/// Pauses the subscription if it is active (a change of its routing, like any update); the row as
/// paused, or `None` when it was not active.
pub async fn pause_if_active(
    db: &impl ConnectionTrait,
    id: &SubscriptionId,
    now: i64,
) -> Result<Option<subscription::Model>, DbErr> {
    let paused = Subscriptions::update_many()
        .col_expr(Column::Status, Expr::val(SubscriptionStatus::Paused.as_str()))
        .col_expr(Column::UpdatedAt, Expr::val(now))
        .filter(Column::Id.eq(id.clone()))
        .filter(Column::Status.eq(SubscriptionStatus::Active.as_str()))
        .exec(db)
        .await?;
    if paused.rows_affected == 0 {
        return Ok(None);
    }
    get(db, id).await
}

pub async fn delete(db: &impl ConnectionTrait, id: &SubscriptionId) -> Result<u64, DbErr> {
    Ok(Subscriptions::delete_by_id(id.clone()).exec(db).await?.rows_affected)
}

pub async fn get(db: &impl ConnectionTrait, id: &SubscriptionId) -> Result<Option<subscription::Model>, DbErr> {
    Subscriptions::find_by_id(id.clone()).one(db).await
}

pub async fn by_ids(db: &impl ConnectionTrait, ids: Vec<SubscriptionId>) -> Result<Vec<subscription::Model>, DbErr> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Subscriptions::find().filter(Column::Id.is_in(ids)).all(db).await
}

/// The customer's subscriptions that deliver to an endpoint (through their index by customer).
pub async fn of_endpoint(
    db: &impl ConnectionTrait,
    customer_id: &CustomerId,
    endpoint_id: &EndpointId,
) -> Result<Vec<subscription::Model>, DbErr> {
    Subscriptions::find()
        .filter(Column::CustomerId.eq(customer_id.clone()))
        .filter(Column::EndpointId.eq(endpoint_id.clone()))
        .order_by_asc(Column::Name)
        .all(db)
        .await
}

pub async fn list(
    db: &impl ConnectionTrait,
    customer_id: Option<&CustomerId>,
    page: &PageRequest,
) -> Result<Vec<subscription::Model>, DbErr> {
    let mut query = Subscriptions::find();
    if let Some(customer_id) = customer_id {
        query = query.filter(Column::CustomerId.eq(customer_id.clone()));
    }
    page::newest(db, query, Column::Id, page).await
}

/// The customer's active subscriptions, which an event is matched against.
pub async fn active_for_customer(
    db: &impl ConnectionTrait,
    customer_id: &CustomerId,
) -> Result<Vec<subscription::Model>, DbErr> {
    Subscriptions::find()
        .filter(Column::CustomerId.eq(customer_id.clone()))
        .filter(Column::Status.eq("active"))
        .all(db)
        .await
}

/// The subscriptions of several customers that events go to (a publish
/// batch): the active ones, and the paused ones, whose messages their pause
/// holds; each with its endpoint (`None` only if the endpoint row is missing).
pub async fn routable_with_endpoints(
    db: &impl ConnectionTrait,
    customer_ids: &[CustomerId],
) -> Result<Vec<(subscription::Model, Option<endpoint::Model>)>, DbErr> {
    // The customers travel as one JSON parameter: the same text, and plan, for any number of them.
    let customers = serde_json::to_string(customer_ids).expect("strings serialize to JSON");
    let of_customers = match db.get_database_backend() {
        DbBackend::Postgres => r#""subscriptions"."customer_id" IN (SELECT json_array_elements_text($1::json))"#,
        // SQLite's placeholder is `?`; sea-query renumbers PostgreSQL's `$1` in place.
        _ => r#""subscriptions"."customer_id" IN (SELECT value FROM json_each(?))"#,
    };
    let to_endpoint = Subscriptions::belongs_to(endpoint::Entity).from(Column::EndpointId).to(endpoint::Column::Id);
    Subscriptions::find()
        .join(JoinType::LeftJoin, to_endpoint.into())
        .select_also(endpoint::Entity)
        .filter(Expr::cust_with_values(of_customers, [customers]))
        .filter(Column::Status.is_in(ROUTABLE))
        .all(db)
        .await
}

/// The subscriptions, active or paused, of these customers whose event types
/// name one of `types` (exactly: a `*` does not name them).
pub async fn naming_types(
    db: &impl ConnectionTrait,
    customer_ids: Vec<CustomerId>,
    types: &[&str],
) -> Result<Vec<subscription::Model>, DbErr> {
    // The stored list is JSON: a type it names appears quoted, and only then.
    let named = types.iter().fold(Condition::any(), |any, t| {
        any.add(Column::EventTypes.like(format!("%{}%", serde_json::Value::from(*t))))
    });
    let mut found = Vec::new();
    // A few hundred customers per statement, within both databases' limits on bound values.
    for customers in customer_ids.chunks(500) {
        let rows = Subscriptions::find()
            .filter(Column::CustomerId.is_in(customers.iter().map(CustomerId::as_str)))
            .filter(Column::Status.is_in(ROUTABLE))
            .filter(named.clone())
            .all(db)
            .await?;
        found.extend(
            rows.into_iter().filter(|s| event_types(&s.event_types).iter().any(|t| types.contains(&t.as_str()))),
        );
    }
    Ok(found)
}

/// The routing version of each of these customers that exists: one more with
/// every change to its subscriptions (see migration m0005).
pub async fn routing_versions(
    db: &impl ConnectionTrait,
    customer_ids: &[CustomerId],
) -> Result<HashMap<CustomerId, i64>, DbErr> {
    let customers = serde_json::to_string(customer_ids).expect("strings serialize to JSON");
    let backend = db.get_database_backend();
    let sql = match backend {
        DbBackend::Postgres => {
            "SELECT id, routing_version FROM customers WHERE id IN (SELECT json_array_elements_text($1::json))"
        }
        _ => "SELECT id, routing_version FROM customers WHERE id IN (SELECT value FROM json_each(?))",
    };
    let rows = db.query_all_raw(Statement::from_sql_and_values(backend, sql, [customers.into()])).await?;
    rows.iter()
        .map(|row| Ok((row.try_get::<CustomerId>("", "id")?, row.try_get::<i64>("", "routing_version")?)))
        .collect()
}

/// Subscriptions whose current or previous secret is not sealed yet.
pub async fn with_plaintext_secrets(db: &impl ConnectionTrait) -> Result<Vec<subscription::Model>, DbErr> {
    let unsealed = |column: Column| column.not_like(format!("{}%", crate::secrets::SEALED_PREFIX));
    Subscriptions::find()
        .filter(sea_orm::Condition::any().add(unsealed(Column::Secret)).add(
            sea_orm::Condition::all().add(Column::PreviousSecret.is_not_null()).add(unsealed(Column::PreviousSecret)),
        ))
        .all(db)
        .await
}

/// The event types a subscription stored as JSON; none when unreadable.
pub fn event_types(event_types_json: &str) -> Vec<String> {
    serde_json::from_str(event_types_json).unwrap_or_default()
}

/// The subscription's stored policy (validated when it was saved).
pub fn policy_of(sub: &subscription::Model) -> Arc<RetryPolicy> {
    stored_policy(&sub.retry_policy)
}

fn stored_policy(text: &str) -> Arc<RetryPolicy> {
    if let Some(policy) = POLICIES.get(text) {
        return policy;
    }
    let policy = Arc::new(
        serde_json::from_str(text)
            .ok()
            .and_then(|v| RetryPolicy::parse(&v, "retry_policy").ok())
            .unwrap_or_else(RetryPolicy::default_policy),
    );
    POLICIES.insert(text.to_string(), policy.clone());
    policy
}

/// The retry policies read so far, by their stored text. Every publish and every
/// delivery needs its subscription's policy; reading the JSON each time cost more
/// than this lookup. Few distinct texts exist (presets, mostly).
static POLICIES: LazyLock<Cache<String, Arc<RetryPolicy>>> = LazyLock::new(|| Cache::new(MAX_POLICIES));
const MAX_POLICIES: usize = 1024;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use domain::policy::{Preset, Schedule};

    use super::stored_policy;

    #[test]
    fn a_stored_policy_is_read_once_per_text() {
        let workfront = r#""workfront""#;
        let first = stored_policy(workfront);
        assert_eq!(first.schedule, Schedule::Preset(Preset::Workfront));
        assert!(Arc::ptr_eq(&first, &stored_policy(workfront)), "the second reading is the first's");
        let other = stored_policy(r#"{"kind":"exponential","min_delay_secs":1,"max_delay_secs":60}"#);
        assert_eq!(other.schedule, Schedule::Exponential { min_delay_secs: 1, max_delay_secs: 60 });
    }
}
