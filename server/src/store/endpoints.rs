use app::domain::breaker::{Circuit, Window};
use app::domain::states::EndpointState;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter,
    QueryOrder, QuerySelect,
};

use super::entities::endpoint::{self, Column, Entity as Endpoints};
use super::page::PageRequest;

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

pub async fn get(db: &impl ConnectionTrait, id: &str) -> Result<Option<endpoint::Model>, DbErr> {
    Endpoints::find_by_id(id.to_string()).one(db).await
}

pub async fn list(
    db: &impl ConnectionTrait,
    customer_id: Option<&str>,
    page: &PageRequest,
) -> Result<Vec<endpoint::Model>, DbErr> {
    let mut query = Endpoints::find().order_by_desc(Column::Id).limit(page.limit + 1);
    if let Some(customer_id) = customer_id {
        query = query.filter(Column::CustomerId.eq(customer_id));
    }
    if let Some(before) = &page.before {
        query = query.filter(Column::Id.lt(before.clone()));
    }
    query.all(db).await
}

/// Endpoints whose circuit is disabled or locked.
pub async fn not_closed(db: &impl ConnectionTrait, customer_id: Option<&str>) -> Result<Vec<endpoint::Model>, DbErr> {
    let mut query =
        Endpoints::find().filter(Column::State.ne(EndpointState::Closed.as_str())).order_by_asc(Column::Url);
    if let Some(customer_id) = customer_id {
        query = query.filter(Column::CustomerId.eq(customer_id));
    }
    query.limit(100).all(db).await
}

pub async fn by_ids(db: &impl ConnectionTrait, ids: Vec<String>) -> Result<Vec<endpoint::Model>, DbErr> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Endpoints::find().filter(Column::Id.is_in(ids)).all(db).await
}

/// The endpoint, locked for the rest of the transaction (PostgreSQL), so that
/// concurrent attempts apply the breaker's rules one after another.
pub async fn get_for_update(db: &impl ConnectionTrait, id: &str) -> Result<Option<endpoint::Model>, DbErr> {
    Endpoints::find_by_id(id.to_string()).lock_exclusive().one(db).await
}

pub fn circuit_of(row: &endpoint::Model) -> Circuit {
    Circuit {
        state: EndpointState::parse(&row.state).unwrap_or(EndpointState::Closed),
        consecutive_failures: row.consecutive_failures.max(0) as u64,
        window: Window::from_json(&row.window_buckets),
        last_success_at: row.last_success_at,
        last_failure_at: row.last_failure_at,
        next_probe_at: row.next_probe_at,
    }
}

pub async fn save_circuit(db: &impl ConnectionTrait, id: &str, c: &Circuit, now_ms: i64) -> Result<(), DbErr> {
    Endpoints::update_many()
        .col_expr(Column::State, Expr::val(c.state.as_str()))
        .col_expr(Column::ConsecutiveFailures, Expr::val(c.consecutive_failures as i64))
        .col_expr(Column::WindowBuckets, Expr::val(c.window.to_json()))
        .col_expr(Column::LastSuccessAt, Expr::val(c.last_success_at))
        .col_expr(Column::LastFailureAt, Expr::val(c.last_failure_at))
        .col_expr(Column::NextProbeAt, Expr::val(c.next_probe_at))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::Id.eq(id))
        .exec(db)
        .await
        .map(|_| ())
}

/// Reserves the probe of a disabled endpoint: true for exactly one caller
/// while the probe is due; it moves the next probe `probe_ms` ahead.
pub async fn take_probe(db: &impl ConnectionTrait, id: &str, now_ms: i64, probe_ms: i64) -> Result<bool, DbErr> {
    let due = Condition::any().add(Column::NextProbeAt.is_null()).add(Column::NextProbeAt.lte(now_ms));
    let result = Endpoints::update_many()
        .col_expr(Column::NextProbeAt, Expr::val(now_ms + probe_ms))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::Id.eq(id))
        .filter(Column::State.eq(EndpointState::Disabled.as_str()))
        .filter(due)
        .exec(db)
        .await?;
    Ok(result.rows_affected == 1)
}
