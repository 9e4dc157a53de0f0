//! Endpoints (one circuit per customer and target URL): creation, the circuit's
//! state as the breaker reads and saves it, probes, locks and lists.

use domain::breaker::{Circuit, Gate, Window};
use domain::ids::{CustomerId, EndpointId};
use domain::states::EndpointState;
use sea_orm::sea_query::Expr;
use std::sync::LazyLock;

use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DbBackend, DbErr, EntityTrait, IntoActiveModel,
    QueryFilter, QueryOrder, QuerySelect, QueryTrait, Statement, Value,
};

use super::entities::endpoint::{self, Column, Entity as Endpoints};
use super::page::{self, PageRequest};
use super::recordset::{self, Type, col, nullable};
use super::sqlite_direct::Direct;

/// The endpoint of `(customer, url)`, created closed when it does not exist yet.
pub async fn get_or_create(db: &impl ConnectionTrait, row: endpoint::Model) -> Result<endpoint::Model, DbErr> {
    let (customer_id, url) = (row.customer_id.clone(), row.url.clone());
    Endpoints::insert(row.into_active_model().reset_all())
        .on_conflict_do_nothing_on([Column::CustomerId, Column::Url])
        .exec_without_returning(db)
        .await?;
    Endpoints::find()
        .filter(Column::CustomerId.eq(customer_id))
        .filter(Column::Url.eq(url))
        .one(db)
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("endpoint".into()))
}

pub async fn get(db: &impl ConnectionTrait, id: &EndpointId) -> Result<Option<endpoint::Model>, DbErr> {
    Endpoints::find_by_id(id.clone()).one(db).await
}

pub async fn list(
    db: &impl ConnectionTrait,
    customer_id: Option<&CustomerId>,
    page: &PageRequest,
) -> Result<Vec<endpoint::Model>, DbErr> {
    let mut query = Endpoints::find();
    if let Some(customer_id) = customer_id {
        query = query.filter(Column::CustomerId.eq(customer_id.clone()));
    }
    page::newest(db, query, Column::Id, page).await
}

/// Endpoints whose circuit is disabled or locked.
pub async fn not_closed(
    db: &impl ConnectionTrait,
    customer_id: Option<&CustomerId>,
) -> Result<Vec<endpoint::Model>, DbErr> {
    let mut query =
        Endpoints::find().filter(Column::State.ne(EndpointState::Closed.as_str())).order_by_asc(Column::Url);
    if let Some(customer_id) = customer_id {
        query = query.filter(Column::CustomerId.eq(customer_id.clone()));
    }
    query.limit(100).all(db).await
}

/// How many endpoints are in each circuit state (a scan of the endpoints: one row per target URL).
pub async fn count_by_state(db: &impl ConnectionTrait) -> Result<Vec<(EndpointState, u64)>, DbErr> {
    let rows: Vec<(String, i64)> = Endpoints::find()
        .select_only()
        .column(Column::State)
        .column_as(Column::Id.count(), "n")
        .group_by(Column::State)
        .into_tuple()
        .all(db)
        .await?;
    Ok(EndpointState::ALL
        .iter()
        .map(|state| {
            let n = rows.iter().filter(|(s, _)| s == state.as_str()).map(|(_, n)| (*n).max(0) as u64).sum();
            (*state, n)
        })
        .collect())
}

pub async fn by_ids(db: &impl ConnectionTrait, ids: Vec<EndpointId>) -> Result<Vec<endpoint::Model>, DbErr> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Endpoints::find().filter(Column::Id.is_in(ids)).all(db).await
}

/// The endpoints, locked for the rest of the transaction (PostgreSQL), so that
/// concurrent batches of attempts apply the breaker's rules one after another.
/// In id order: concurrent batches never lock them crosswise.
pub async fn lock_many(db: &impl ConnectionTrait, ids: Vec<EndpointId>) -> Result<Vec<endpoint::Model>, DbErr> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Endpoints::find().filter(Column::Id.is_in(ids)).order_by_asc(Column::Id).lock_exclusive().all(db).await
}

/// [`lock_many`] in a transaction on SQLite's writer connection, which holds the
/// database's one write lock already.
pub fn lock_many_direct(txn: &Direct, ids: Vec<EndpointId>) -> Result<Vec<endpoint::Model>, DbErr> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let statement = Endpoints::find().filter(Column::Id.is_in(ids)).order_by_asc(Column::Id).build(DbBackend::Sqlite);
    txn.rows(&statement, |row| {
        let state: String = row.get("state")?;
        Ok(endpoint::Model {
            id: EndpointId::from(row.get::<_, String>("id")?),
            customer_id: CustomerId::from(row.get::<_, String>("customer_id")?),
            url: row.get("url")?,
            state: state.parse().map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?,
            consecutive_failures: row.get("consecutive_failures")?,
            window_buckets: row.get("window_buckets")?,
            last_success_at: row.get("last_success_at")?,
            last_failure_at: row.get("last_failure_at")?,
            next_probe_at: row.get("next_probe_at")?,
            created_at: row.get("created_at")?,
            updated_at: row.get("updated_at")?,
        })
    })
}

/// The endpoint's gate, read from its state alone (its window stays unparsed).
pub fn gate_of(row: &endpoint::Model, now_ms: i64) -> Gate {
    Gate::of(row.state, row.next_probe_at, now_ms)
}

pub fn circuit_of(row: &endpoint::Model) -> Circuit {
    Circuit {
        state: row.state,
        consecutive_failures: row.consecutive_failures.max(0) as u64,
        window: Window::from_json(&row.window_buckets),
        last_success_at: row.last_success_at,
        last_failure_at: row.last_failure_at,
        next_probe_at: row.next_probe_at,
    }
}

/// Saves the circuits of several endpoints: on PostgreSQL in one statement.
pub async fn save_circuits(
    db: &impl ConnectionTrait,
    circuits: &[(EndpointId, Circuit)],
    now_ms: i64,
) -> Result<(), DbErr> {
    if circuits.is_empty() {
        return Ok(());
    }
    if circuits.len() == 1 {
        let (id, circuit) = &circuits[0];
        return save_circuit(db, id, circuit, now_ms).await;
    }
    let rows = circuit_rows(circuits);
    let (sql, values) = match db.get_database_backend() {
        DbBackend::Postgres => {
            let mut values = circuit_arrays(&rows);
            values.push(now_ms.into());
            (SAVE_CIRCUITS.clone(), values)
        }
        _ => sqlite_save_circuits(&rows, now_ms),
    };
    db.execute_raw(Statement::from_sql_and_values(db.get_database_backend(), sql, values)).await?;
    Ok(())
}

/// [`save_circuits`] in a transaction on SQLite's writer connection: one statement.
pub fn save_circuits_direct(txn: &Direct, circuits: &[(EndpointId, Circuit)], now_ms: i64) -> Result<(), DbErr> {
    if circuits.is_empty() {
        return Ok(());
    }
    let (sql, values) = sqlite_save_circuits(&circuit_rows(circuits), now_ms);
    txn.execute(&Statement::from_sql_and_values(DbBackend::Sqlite, sql, values)).map(drop)
}

fn circuit_rows(circuits: &[(EndpointId, Circuit)]) -> Vec<CircuitRow<'_>> {
    circuits
        .iter()
        .map(|(id, c)| CircuitRow {
            id,
            state: c.state.as_str(),
            consecutive_failures: c.consecutive_failures as i64,
            window_buckets: c.window.to_json(),
            last_success_at: c.last_success_at,
            last_failure_at: c.last_failure_at,
            next_probe_at: c.next_probe_at,
        })
        .collect()
}

/// [`SAVE_CIRCUITS`] on SQLite: the rows as `VALUES`, whose columns are column1, column2, …
/// in the order of [`CIRCUIT_COLUMNS`].
fn sqlite_save_circuits(rows: &[CircuitRow], now_ms: i64) -> (String, Vec<Value>) {
    let mut values: Vec<Value> = vec![now_ms.into()];
    for r in rows {
        values.extend([
            r.id.as_str().into(),
            r.state.into(),
            r.consecutive_failures.into(),
            r.window_buckets.clone().into(),
            r.last_success_at.into(),
            r.last_failure_at.into(),
            r.next_probe_at.into(),
        ]);
    }
    let row = format!("({})", vec!["?"; CIRCUIT_COLUMNS.len()].join(", "));
    let sql = format!(
        "UPDATE endpoints SET updated_at = ?, state = c.column2, consecutive_failures = c.column3, \
           window_buckets = c.column4, last_success_at = c.column5, last_failure_at = c.column6, \
           next_probe_at = c.column7 \
         FROM (VALUES {}) AS c WHERE endpoints.id = c.column1",
        vec![row; rows.len()].join(", ")
    );
    (sql, values)
}

/// The circuits as the arrays of [`CIRCUIT_COLUMNS`].
fn circuit_arrays(rows: &[CircuitRow]) -> Vec<Value> {
    let mut arrays = recordset::Arrays::new(CIRCUIT_COLUMNS, rows.len());
    for r in rows {
        arrays.push("id", r.id.as_str().into());
        arrays.push("state", r.state.into());
        arrays.push("consecutive_failures", r.consecutive_failures.into());
        arrays.push("window_buckets", r.window_buckets.as_str().into());
        arrays.push("last_success_at", r.last_success_at.into());
        arrays.push("last_failure_at", r.last_failure_at.into());
        arrays.push("next_probe_at", r.next_probe_at.into());
    }
    arrays.into_values()
}

struct CircuitRow<'a> {
    id: &'a EndpointId,
    state: &'a str,
    consecutive_failures: i64,
    window_buckets: String,
    last_success_at: Option<i64>,
    last_failure_at: Option<i64>,
    next_probe_at: Option<i64>,
}

const CIRCUIT_COLUMNS: recordset::Columns = &[
    col("id", Type::Text),
    col("state", Type::Text),
    col("consecutive_failures", Type::Int8),
    col("window_buckets", Type::Text),
    nullable("last_success_at", Type::Int8),
    nullable("last_failure_at", Type::Int8),
    nullable("next_probe_at", Type::Int8),
];

static SAVE_CIRCUITS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE endpoints SET state = c.state, consecutive_failures = c.consecutive_failures, \
           window_buckets = c.window_buckets, last_success_at = c.last_success_at, \
           last_failure_at = c.last_failure_at, next_probe_at = c.next_probe_at, updated_at = ${} \
         FROM {} WHERE endpoints.id = c.id",
        recordset::parameters(CIRCUIT_COLUMNS) + 1,
        recordset::rows(CIRCUIT_COLUMNS, 1, "c")
    )
});

pub async fn save_circuit(db: &impl ConnectionTrait, id: &EndpointId, c: &Circuit, now_ms: i64) -> Result<(), DbErr> {
    Endpoints::update_many()
        .col_expr(Column::State, Expr::val(c.state.as_str()))
        .col_expr(Column::ConsecutiveFailures, Expr::val(c.consecutive_failures as i64))
        .col_expr(Column::WindowBuckets, Expr::val(c.window.to_json()))
        .col_expr(Column::LastSuccessAt, Expr::val(c.last_success_at))
        .col_expr(Column::LastFailureAt, Expr::val(c.last_failure_at))
        .col_expr(Column::NextProbeAt, Expr::val(c.next_probe_at))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::Id.eq(id.clone()))
        .exec(db)
        .await
        .map(|_| ())
}

/// Reserves the probe of a disabled endpoint: true for exactly one caller
/// while the probe is due; it moves the next probe `probe_ms` ahead.
pub async fn take_probe(db: &impl ConnectionTrait, id: &EndpointId, now_ms: i64, probe_ms: i64) -> Result<bool, DbErr> {
    let due = Condition::any().add(Column::NextProbeAt.is_null()).add(Column::NextProbeAt.lte(now_ms));
    let result = Endpoints::update_many()
        .col_expr(Column::NextProbeAt, Expr::val(now_ms + probe_ms))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::Id.eq(id.clone()))
        .filter(Column::State.eq(EndpointState::Disabled.as_str()))
        .filter(due)
        .exec(db)
        .await?;
    Ok(result.rows_affected == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(state: EndpointState, next_probe_at: Option<i64>) -> endpoint::Model {
        endpoint::Model {
            id: "ep_1".into(),
            customer_id: "cus_1".into(),
            url: "https://example.com/hook".into(),
            state,
            consecutive_failures: 3,
            window_buckets: "not json".into(),
            last_success_at: None,
            last_failure_at: Some(5),
            next_probe_at,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn the_gate_read_from_the_state_alone_is_the_circuits_gate() {
        use EndpointState::{Closed, Disabled, Locked};
        for (state, probe) in [(Closed, None), (Locked, None), (Disabled, Some(2_000)), (Disabled, Some(500))] {
            let row = row(state, probe);
            assert_eq!(gate_of(&row, 1_000), circuit_of(&row).gate(1_000), "{state} {probe:?}");
        }
        assert_eq!(gate_of(&row(Disabled, Some(2_000)), 1_000), Gate::Defer { until_ms: 2_000 });
    }
}
