//! The plans SQLite makes of the messages' statements: each reads the index it was written for.

use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, Database, DbBackend, EntityTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait,
    Statement,
};

use domain::ids::EndpointId;
use domain::states::MessageState;
use migrations::{FRESH_LANE, RETRY_LANE};

use super::claim::{lane_due, not_leased};
use super::log::MessageFilter;
use super::transitions::{ending_held, expire_held_in, holding, releasing, taking_back_in};
use super::*;
use crate::store::entities::message::{Column, Entity as Messages};

/// SQLite's query plan of `stmt` on a fresh schema, a line per step.
pub(crate) async fn plan(stmt: Statement) -> Vec<String> {
    let db = Database::connect("sqlite::memory:").await.unwrap();
    crate::store::migrate(&db).await.unwrap();
    let explain = Statement::from_sql_and_values(
        DbBackend::Sqlite,
        format!("EXPLAIN QUERY PLAN {}", stmt.sql),
        stmt.values.map(|v| v.0).unwrap_or_default(),
    );
    let rows = db.query_all_raw(explain).await.unwrap();
    rows.iter().map(|r| r.try_get::<String>("", "detail").unwrap()).collect()
}

/// The plan of the claim's pick for `lane`.
async fn pick_plan(lane: Lane, among: Among<'_>) -> String {
    let condition = lane_due(DbBackend::Sqlite, lane, 1_000, among);
    let select = Messages::find().select_only().column(Column::Id).filter(condition);
    plan(select.order_by_asc(Column::NextAttemptAt).limit(128).build(DbBackend::Sqlite)).await.join("\n")
}

#[test]
fn a_batch_carries_every_column_of_a_message() {
    crate::store::recordset::tests::covers::<Messages>(COLUMNS);
}

#[tokio::test]
async fn each_lane_reads_its_own_partial_index() {
    let busy = [EndpointId::from("ep_busy")];
    let fresh = pick_plan(Lane::Fresh, Among::AllBut(&busy)).await;
    assert!(fresh.contains("idx_messages_fresh (state=? AND next_attempt_at<?)"), "{fresh}");
    assert!(!fresh.contains("idx_messages_retry"), "{fresh}");
    let retry = pick_plan(Lane::Retry, Among::AllBut(&busy)).await;
    assert!(retry.contains("idx_messages_retry (state=? AND next_attempt_at<?)"), "{retry}");
}

/// The retry lane reads the fresh lane's index only for first attempts whose
/// lease ended (`delivering`, due), never its pending messages.
#[tokio::test]
async fn the_retry_lane_finds_ended_leases_in_both_lanes_indexes() {
    let retry = pick_plan(Lane::Retry, Among::AllBut(&[])).await;
    assert!(retry.contains("MULTI-INDEX OR"), "{retry}");
    assert!(retry.contains("idx_messages_retry (state=? AND next_attempt_at<?)"), "{retry}");
    assert!(retry.contains("idx_messages_fresh (state=? AND next_attempt_at<?)"), "{retry}");
    assert!(!retry.contains("SCAN messages"), "{retry}");
}

/// Expiry of held messages and the take-back of dead leases run one statement per lane.
#[tokio::test]
async fn expiry_and_the_take_back_of_leases_read_each_lanes_index() {
    for (lane, index) in [(FRESH_LANE, "idx_messages_fresh"), (RETRY_LANE, "idx_messages_retry")] {
        for (update, range) in [(expire_held_in(lane, 1_000), "<"), (taking_back_in(lane, None, 1_000), ">")] {
            let plan = plan(update.build(DbBackend::Sqlite)).await.join("\n");
            assert!(plan.contains(&format!("{index} (state=? AND next_attempt_at{range}?)")), "{plan}");
        }
    }
}

#[tokio::test]
async fn the_log_by_state_reads_the_undelivered_index_except_for_delivered() {
    let log = |state| async move {
        let filter = MessageFilter { customer_id: Some("cus_a".into()), state: Some(state), ..Default::default() };
        let select = Messages::find().filter(filter.condition()).order_by_desc(Column::Id).limit(51);
        plan(select.build(DbBackend::Sqlite)).await.join("\n")
    };
    let dead = log(MessageState::Dead).await;
    assert!(dead.contains("idx_messages_customer_undelivered (customer_id=? AND state=?)"), "{dead}");
    let delivered = log(MessageState::Delivered).await;
    assert!(delivered.contains("idx_messages_customer (customer_id=?)"), "{delivered}");
}

/// A window's end starts the customer's log there, not at its newest message.
#[tokio::test]
async fn the_log_of_a_window_starts_at_its_end() {
    let filter = MessageFilter {
        customer_id: Some("cus_a".into()),
        since_ms: Some(1_000),
        until_ms: Some(2_000),
        ..Default::default()
    };
    let select = Messages::find().filter(filter.condition()).order_by_desc(Column::Id).limit(51);
    let plan = plan(select.build(DbBackend::Sqlite)).await.join("\n");
    assert!(plan.contains("idx_messages_customer (customer_id=? AND id<?)"), "{plan}");
}

#[tokio::test]
async fn a_claim_for_one_endpoint_reads_that_endpoints_index_range() {
    let fresh = pick_plan(Lane::Fresh, Among::Endpoint(&"ep_a".into())).await;
    assert!(
        fresh.contains("idx_messages_endpoint_waiting (endpoint_id=? AND state=? AND next_attempt_at<?)"),
        "{fresh}"
    );
    let retry = pick_plan(Lane::Retry, Among::Endpoint(&"ep_a".into())).await;
    assert!(
        retry.contains("idx_messages_endpoint_waiting (endpoint_id=? AND state=? AND next_attempt_at<?)"),
        "{retry}"
    );
    assert!(!retry.contains("SCAN messages"), "ended leases are found in the lanes' indexes: {retry}");
}

#[tokio::test]
async fn locking_and_unlocking_an_endpoint_read_its_waiting_messages() {
    let hold = plan(holding(&"ep_a".into(), 1_000).build(DbBackend::Sqlite)).await.join("\n");
    assert!(hold.contains("idx_messages_endpoint_waiting (endpoint_id=? AND state=?"), "{hold}");
    let release = plan(releasing(&"ep_a".into(), 1_000, 1_000).build(DbBackend::Sqlite)).await.join("\n");
    assert!(release.contains("idx_messages_endpoint_waiting (endpoint_id=?"), "{release}");
    assert!(!release.contains("SCAN messages"), "{release}");
    let end = plan(ending_held(&"ep_a".into(), Some(1_000), 1_000).build(DbBackend::Sqlite)).await.join("\n");
    assert!(end.contains("idx_messages_endpoint_waiting (endpoint_id=? AND state=?"), "{end}");
}

#[tokio::test]
async fn the_claims_update_finds_its_rows_by_id() {
    let update = Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Delivering.as_str()))
        .filter(Column::Id.is_in(["msg_a", "msg_b"]))
        .filter(not_leased(1_000))
        .build(DbBackend::Sqlite);
    assert_eq!(plan(update).await, ["SEARCH messages USING INDEX sqlite_autoindex_messages_1 (id=?)"]);
}

/// The gauges count the open messages from the lanes' indexes and the
/// undelivered ones from the log's, never reading the table itself.
#[tokio::test]
async fn the_gauges_read_only_the_partial_indexes() {
    let open = plan(Statement::from_string(DbBackend::Sqlite, super::gauges::by_state_sql())).await.join("\n");
    // The retry lane's index is read with each entry's row (for `attempt_count`): still only the open ones.
    for index in ["idx_messages_fresh", "idx_messages_retry", "idx_messages_customer_undelivered"] {
        assert!(open.contains(&format!("INDEX {index}")), "{index}: {open}");
    }
    assert_eq!(open.matches("SCAN messages USING").count(), 3, "{open}");
    for lane in [Lane::Fresh, Lane::Retry] {
        let oldest =
            plan(super::gauges::oldest_due_query(DbBackend::Sqlite, lane, 1_000).build(DbBackend::Sqlite)).await;
        let oldest = oldest.join("\n");
        assert!(
            oldest.contains("USING INDEX idx_messages_") || oldest.contains("USING COVERING INDEX idx_messages_"),
            "{oldest}"
        );
        assert!(!oldest.contains("SCAN messages\n") && !oldest.ends_with("SCAN messages"), "{oldest}");
    }
}
