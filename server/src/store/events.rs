//! Events: the publish's insert of a batch with its messages (checked against
//! the routing it was made with), lookups by id and by `(customer, source, id)`.

use domain::ids::{CustomerId, EndpointId, EventId, MessageId};
use std::sync::LazyLock;

use domain::states::EndpointState;
use foldhash::{HashSet, HashSetExt};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, IntoActiveModel,
    QueryFilter, QueryOrder, QuerySelect, Statement, TryInsertResult,
};

use super::counts::ADD_TO_MESSAGE_COUNT;
use super::entities::event::{self, Column, Entity as Events};
use super::entities::message;
use super::page::{self, PageRequest};
use super::recordset::{self, Arrays, Type, col};
use super::{bulk, messages, sqlite_direct};
use crate::ids::{ID_AFTER_CREATION_MS, first_id_at};

/// Inserts the event unless `(customer, source, id)` exists; true when inserted.
pub async fn insert_new(db: &impl ConnectionTrait, row: event::Model) -> Result<bool, DbErr> {
    let result = Events::insert(row.into_active_model().reset_all())
        .on_conflict_do_nothing_on([Column::CustomerId, Column::Source, Column::CeId])
        .exec_without_returning(db)
        .await?;
    Ok(matches!(result, TryInsertResult::Inserted(n) if n > 0))
}

/// What a publish batch was routed by, read before its write: the routing
/// version of each customer (see migration m0005) and the state of each of
/// their endpoints. The batch is stored only if its write finds them unchanged.
#[derive(Debug, Default, serde::Serialize)]
pub struct Routed {
    pub customers: Vec<RoutedCustomer>,
    pub endpoints: Vec<RoutedEndpoint>,
}

#[derive(Debug, serde::Serialize)]
pub struct RoutedCustomer {
    pub id: CustomerId,
    pub routing_version: i64,
}

#[derive(Debug, serde::Serialize)]
pub struct RoutedEndpoint {
    pub id: EndpointId,
    pub state: EndpointState,
}

impl Routed {
    /// The parameters of [`still_routed`] on PostgreSQL: the customers' columns, then the endpoints'.
    fn arrays(&self) -> Vec<sea_orm::Value> {
        let mut customers = Arrays::new(ROUTED_CUSTOMER_COLUMNS, self.customers.len());
        for customer in &self.customers {
            customers.push("id", customer.id.as_str().into());
            customers.push("routing_version", customer.routing_version.into());
        }
        let mut endpoints = Arrays::new(ROUTED_ENDPOINT_COLUMNS, self.endpoints.len());
        for endpoint in &self.endpoints {
            endpoints.push("id", endpoint.id.as_str().into());
            endpoints.push("state", endpoint.state.as_str().into());
        }
        let mut values = customers.into_values();
        values.extend(endpoints.into_values());
        values
    }
}

/// Stores a publish batch atomically: the events whose `(customer, source, id)`
/// is new, and the messages of those events (the others' are dropped), counted
/// in their customers' counts. Returns
/// the ids of the events inserted, or `None`, storing nothing, when the routing
/// changed since `routed` was read. Concurrent batches that share keys must
/// list `events` in key order, so that they wait for each other in one
/// direction, never crosswise into a deadlock.
pub async fn insert_with_messages(
    db: &DatabaseConnection,
    events: &[&event::Model],
    messages: &[message::Model],
    routed: &Routed,
) -> Result<Option<HashSet<EventId>>, DbErr> {
    if db.get_database_backend() == DbBackend::Postgres {
        // One statement, committed on its own: one round trip for the whole batch.
        let mut values = Arrays::of_models(COLUMNS, events.iter().copied());
        values.extend(Arrays::of_models(messages::COLUMNS, messages));
        values.extend(routed.arrays());
        let statement = Statement::from_sql_and_values(DbBackend::Postgres, PUBLISH.as_str(), values);
        let rows = db.query_all_raw(statement).await?;
        let ids: Vec<Option<EventId>> = rows.iter().map(|row| row.try_get("", "id")).collect::<Result<_, _>>()?;
        // A NULL id says the routing changed.
        return Ok(ids.into_iter().collect());
    }
    let customers = serde_json::to_string(&routed.customers).expect("strings serialize to JSON");
    let endpoints = serde_json::to_string(&routed.endpoints).expect("strings serialize to JSON");
    // On SQLite the routing check rides on the events' insert; only a batch
    // that inserts nothing asks again, to tell repeated keys from a new routing.
    let inserts = sqlite_inserts_if_routed(events, &customers, &endpoints);
    sqlite_direct::transaction(db, |txn| {
        let mut inserted = HashSet::with_capacity(events.len());
        for statement in &inserts {
            inserted.extend(txn.texts::<EventId>(statement)?);
        }
        if inserted.is_empty() && !events.is_empty() {
            let still = format!("SELECT {SQLITE_STILL_ROUTED} AS still");
            let still = Statement::from_sql_and_values(DbBackend::Sqlite, still, [customers.into(), endpoints.into()]);
            if txn.rows(&still, |row| row.get(0))?.first() != Some(&true) {
                return Ok(None);
            }
        }
        let kept: Vec<message::Model> = messages.iter().filter(|m| inserted.contains(&m.event_id)).cloned().collect();
        messages::insert_many_direct(txn, &kept)?;
        Ok(Some(inserted))
    })
    .await
}

/// SQLite: the statements that insert the events whose key is new, provided
/// the routing is still that of `customers` and `endpoints` (JSON, as
/// [`Routed`] serializes), each returning the ids it inserted (none when the
/// routing changed).
fn sqlite_inserts_if_routed(events: &[&event::Model], customers: &str, endpoints: &str) -> Vec<Statement> {
    let picked: Vec<String> = (1..=COLUMNS.len()).map(|n| format!("column{n}")).collect();
    let chunks = events.chunks(bulk::rows_per_statement::<event::Model>());
    chunks
        .map(|chunk| {
            let (rows, mut values) = bulk::values(DbBackend::Sqlite, chunk.iter().copied());
            values.extend([customers.into(), endpoints.into()]);
            // The WHERE also settles SQLite's reading of `ON CONFLICT` after a SELECT.
            let sql = format!(
                "INSERT INTO events ({}) SELECT {} FROM (VALUES {rows}) WHERE {SQLITE_STILL_ROUTED} \
                 ON CONFLICT (customer_id, source, ce_id) DO NOTHING RETURNING id",
                recordset::names(COLUMNS),
                picked.join(", "),
            );
            Statement::from_sql_and_values(DbBackend::Sqlite, sql, values)
        })
        .collect()
}

/// True when the customers' routing versions and the endpoints' states are
/// still those of parameters `customers` and `endpoints`, as [`Routed`] carries them.
fn still_routed(customers: &str, endpoints: &str) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM {customers} LEFT JOIN customers ON customers.id = r.id \
           WHERE customers.routing_version IS DISTINCT FROM r.routing_version) \
         AND NOT EXISTS (SELECT 1 FROM {endpoints} LEFT JOIN endpoints ON endpoints.id = p.id \
           WHERE endpoints.state IS DISTINCT FROM p.state)"
    )
}

/// [`still_routed`] on SQLite, whose JSON parameters are read with `json_each`.
const SQLITE_STILL_ROUTED: &str = "\
    NOT EXISTS (SELECT 1 FROM json_each(?) AS r LEFT JOIN customers \
      ON customers.id = json_extract(r.value, '$.id') \
      WHERE customers.routing_version IS NOT json_extract(r.value, '$.routing_version')) \
    AND NOT EXISTS (SELECT 1 FROM json_each(?) AS p LEFT JOIN endpoints \
      ON endpoints.id = json_extract(p.value, '$.id') \
      WHERE endpoints.state IS NOT json_extract(p.value, '$.state'))";

/// The columns of an event row, as a batch carries them.
pub const COLUMNS: recordset::Columns = &[
    col("id", Type::Text),
    col("customer_id", Type::Text),
    col("source", Type::Text),
    col("ce_id", Type::Text),
    col("event_type", Type::Text),
    col("payload", Type::Text),
    col("created_at", Type::Int8),
    col("message_ids", Type::Text),
];

const ROUTED_CUSTOMER_COLUMNS: recordset::Columns = &[col("id", Type::Text), col("routing_version", Type::Int8)];
const ROUTED_ENDPOINT_COLUMNS: recordset::Columns = &[col("id", Type::Text), col("state", Type::Text)];

/// The publish batch on PostgreSQL: the new events, then the messages of the
/// events just inserted (a repeated key inserts neither); nothing, and one
/// NULL row, when the routing changed.
static PUBLISH: LazyLock<String> = LazyLock::new(|| {
    let (events, messages) = (recordset::names(COLUMNS), recordset::names(messages::COLUMNS));
    // The parameters: the events' columns, the messages', the customers', the endpoints'.
    let first_message = 1 + recordset::parameters(COLUMNS);
    let first_customer = first_message + recordset::parameters(messages::COLUMNS);
    let first_endpoint = first_customer + recordset::parameters(ROUTED_CUSTOMER_COLUMNS);
    let still = still_routed(
        &recordset::rows(ROUTED_CUSTOMER_COLUMNS, first_customer, "r"),
        &recordset::rows(ROUTED_ENDPOINT_COLUMNS, first_endpoint, "p"),
    );
    format!(
        "WITH routed AS (SELECT {still} AS still \
         ), new_events AS ( \
           INSERT INTO events ({events}) SELECT {events} FROM {} WHERE (SELECT still FROM routed) \
           ON CONFLICT (customer_id, source, ce_id) DO NOTHING RETURNING id \
         ), new_messages AS ( \
           INSERT INTO messages ({messages}) SELECT {messages} FROM {} \
           WHERE m.event_id IN (SELECT id FROM new_events) RETURNING customer_id \
         ), counted AS ( \
           INSERT INTO message_counts (customer_id, messages) \
           SELECT customer_id, count(*) FROM new_messages GROUP BY customer_id ORDER BY customer_id \
           {ADD_TO_MESSAGE_COUNT} \
         ) SELECT id FROM new_events UNION ALL SELECT NULL FROM routed WHERE NOT still",
        recordset::rows(COLUMNS, 1, "e"),
        recordset::rows(messages::COLUMNS, first_message, "m"),
    )
});

pub async fn find_by_key(
    db: &impl ConnectionTrait,
    customer_id: &CustomerId,
    source: &str,
    ce_id: &str,
) -> Result<Option<event::Model>, DbErr> {
    Events::find()
        .filter(Column::CustomerId.eq(customer_id.clone()))
        .filter(Column::Source.eq(source))
        .filter(Column::CeId.eq(ce_id))
        .one(db)
        .await
}

/// The archive's filters; `None` means any.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub customer_id: Option<CustomerId>,
    pub source: Option<String>,
    pub event_type: Option<String>,
    /// Published at or after.
    pub since_ms: Option<i64>,
    /// Published before.
    pub until_ms: Option<i64>,
}

impl EventFilter {
    fn condition(&self) -> sea_orm::Condition {
        let mut cond = self.indexed();
        if let Some(v) = &self.source {
            cond = cond.add(Column::Source.eq(v.as_str()));
        }
        if let Some(v) = &self.event_type {
            cond = cond.add(Column::EventType.eq(v.as_str()));
        }
        if let Some(v) = self.since_ms {
            cond = cond.add(Column::CreatedAt.gte(v));
        }
        if let Some(v) = self.until_ms {
            cond = cond.add(Column::CreatedAt.lt(v));
        }
        cond
    }

    /// What the indexes by id answer: a customer's events, and the end of a window.
    fn indexed(&self) -> sea_orm::Condition {
        let mut cond = sea_orm::Condition::all();
        if let Some(v) = &self.customer_id {
            cond = cond.add(Column::CustomerId.eq(v.clone()));
        }
        if let Some(v) = self.until_ms {
            // The bound lets the scan start at the window's end.
            cond = cond.add(Column::Id.lt(first_id_at("evt", v + ID_AFTER_CREATION_MS)));
        }
        cond
    }

    /// Whether some condition is checked row by row, so that a search must be bounded.
    fn checks_rows(&self) -> bool {
        self.source.is_some() || self.event_type.is_some() || self.since_ms.is_some()
    }
}

/// A page of events, newest first. A filter checked row by row reads at most
/// [`page::SCAN_BUDGET`] rows: then the id of the last one read comes back too.
pub async fn list(
    db: &impl ConnectionTrait,
    filter: &EventFilter,
    page: &PageRequest,
) -> Result<(Vec<event::Model>, Option<String>), DbErr> {
    let range = filter.checks_rows().then(|| Events::find().filter(filter.indexed()));
    page::newest_first(db, range, Events::find().filter(filter.condition()), Column::Id, page).await
}

/// Up to `limit` events that match, oldest first, after the event `after`.
pub async fn oldest_first(
    db: &impl ConnectionTrait,
    filter: &EventFilter,
    after: Option<&EventId>,
    limit: u64,
) -> Result<Vec<event::Model>, DbErr> {
    let mut query = Events::find().filter(filter.condition()).order_by_asc(Column::Id).limit(limit);
    if let Some(after) = after {
        query = query.filter(Column::Id.gt(after.clone()));
    }
    query.all(db).await
}

/// A customer's kept events with this CloudEvent id (and source, when given); at most two.
pub async fn by_ce_id(
    db: &impl ConnectionTrait,
    customer_id: &CustomerId,
    ce_id: &str,
    source: Option<&str>,
) -> Result<Vec<event::Model>, DbErr> {
    let mut query =
        Events::find().filter(Column::CustomerId.eq(customer_id.clone())).filter(Column::CeId.eq(ce_id)).limit(2);
    if let Some(source) = source {
        query = query.filter(Column::Source.eq(source));
    }
    query.all(db).await
}

/// Lists new messages on their events, as the publish does (see `message_ids`): one statement
/// for up to 500 events (a replay's batch), each message appended in the statement, so that two
/// replays of one event both keep theirs.
pub async fn add_message_ids(db: &impl ConnectionTrait, added: &[(EventId, MessageId)]) -> Result<(), DbErr> {
    let backend = db.get_database_backend();
    for chunk in added.chunks(500) {
        let values: Vec<sea_orm::Value> =
            chunk.iter().flat_map(|(event, message)| [event.as_str().into(), message.as_str().into()]).collect();
        let sql = if backend == DbBackend::Postgres {
            let rows: Vec<String> =
                (0..chunk.len()).map(|i| format!("(${}::text, ${}::text)", 2 * i + 1, 2 * i + 2)).collect();
            format!(
                "UPDATE events SET message_ids = CASE WHEN events.message_ids = '' THEN v.m \
                 ELSE events.message_ids || ',' || v.m END FROM (VALUES {}) AS v(id, m) WHERE events.id = v.id",
                rows.join(", ")
            )
        } else {
            format!(
                "UPDATE events SET message_ids = CASE WHEN message_ids = '' THEN v.column2 \
                 ELSE message_ids || ',' || v.column2 END FROM (VALUES {}) AS v WHERE events.id = v.column1",
                vec!["(?, ?)"; chunk.len()].join(", ")
            )
        };
        db.execute_raw(sea_orm::Statement::from_sql_and_values(backend, sql, values)).await?;
    }
    Ok(())
}

pub async fn get(db: &impl ConnectionTrait, id: &EventId) -> Result<Option<event::Model>, DbErr> {
    Events::find_by_id(id.clone()).one(db).await
}

pub async fn by_ids(db: &impl ConnectionTrait, ids: Vec<EventId>) -> Result<Vec<event::Model>, DbErr> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Events::find().filter(Column::Id.is_in(ids)).all(db).await
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_batch_carries_every_column_of_an_event() {
        super::recordset::tests::covers::<super::Events>(super::COLUMNS);
    }
}
