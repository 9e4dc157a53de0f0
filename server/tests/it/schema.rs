//! The schema as the migrations leave it, on the database under test.

use crate::common;

use sea_orm::{ConnectionTrait, Database, DatabaseConnection, DbBackend, Statement};

/// Every text key column of Herald's indexes, as ("index.column", collation).
/// SeaORM's own table is not Herald's to change.
async fn text_keys(db: &impl ConnectionTrait) -> Vec<(String, String)> {
    let sql = match db.get_database_backend() {
        DbBackend::Postgres => {
            "SELECT i.relname || '.' || a.attname AS key, coalesce(c.collname, '?') AS coll \
             FROM pg_index x \
             JOIN pg_class i ON i.oid = x.indexrelid \
             JOIN pg_class t ON t.oid = x.indrelid \
             JOIN pg_namespace n ON n.oid = t.relnamespace \
             CROSS JOIN LATERAL unnest(x.indkey::int2[], x.indcollation::oid[]) AS k(attnum, collid) \
             JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum \
             LEFT JOIN pg_collation c ON c.oid = k.collid \
             WHERE n.nspname = current_schema() AND t.relname <> 'seaql_migrations' AND k.collid <> 0 \
             ORDER BY 1"
        }
        // SQLite names a collation for every key column, text or not.
        _ => {
            "SELECT m.name || '.' || x.name AS key, x.coll AS coll \
             FROM sqlite_master AS m, pragma_index_xinfo(m.name) AS x \
             WHERE m.type = 'index' AND m.tbl_name <> 'seaql_migrations' AND x.key = 1 AND x.name IS NOT NULL \
             ORDER BY 1"
        }
    };
    let rows = db.query_all_raw(Statement::from_string(db.get_database_backend(), sql)).await.unwrap();
    rows.iter().map(|row| (row.try_get("", "key").unwrap(), row.try_get("", "coll").unwrap())).collect()
}

/// Rolls the schema back until only its first `applied` migrations remain, however many follow.
async fn down_to(db: &DatabaseConnection, applied: usize) {
    use migrations::{Migrator, MigratorTrait};
    let steps = Migrator::migrations().len() - applied;
    Migrator::down(db, Some(steps as u32)).await.unwrap();
}

/// A database of its own, connected, with no table yet; dropped with the first half.
async fn fresh_database() -> (common::TestDb, DatabaseConnection) {
    let test_db = common::TestDb::new().await;
    let db = Database::connect(&test_db.url).await.unwrap();
    (test_db, db)
}

#[tokio::test]
async fn every_index_compares_its_text_byte_by_byte() {
    let (_test_db, db) = fresh_database().await;
    herald::store::migrate(&db).await.unwrap();
    let keys = text_keys(&db).await;
    let names: Vec<&str> = keys.iter().map(|(key, _)| key.as_str()).collect();
    if db.get_database_backend() == DbBackend::Postgres {
        for held in
            ["messages_pkey.id", "idx_messages_customer_undelivered.state", "uq_events_customer_id_source.ce_id"]
        {
            assert!(names.contains(&held), "{held} not among {names:?}");
        }
    }
    assert!(keys.len() > 20, "{keys:?}");
    let by_language: Vec<_> =
        keys.iter().filter(|(_, collation)| !matches!(collation.as_str(), "C" | "BINARY")).collect();
    assert!(by_language.is_empty(), "ordered by a language's rules: {by_language:?}");
}

/// An attempt is named by its message and number: attempts recorded while they
/// had ids of their own keep everything else through the migration, and back.
#[tokio::test]
async fn attempts_keep_their_record_when_their_ids_go_and_come_back() {
    use herald::store::attempts::for_message;
    use migrations::{Migrator, MigratorTrait};

    let (_test_db, db) = fresh_database().await;
    Migrator::up(&db, Some(6)).await.unwrap();
    db.execute_unprepared(
        "INSERT INTO attempts (id, message_id, customer_id, number, started_at, duration_ms, status_code, \
           error_kind, error_detail, outcome, request_headers, response_headers, response_body) \
         VALUES ('att_1', 'msg_1', 'cus_1', 1, 10, 5, 500, NULL, NULL, 'retryable', '{}', '{\"server\":\"x\"}', 'no'), \
                ('att_2', 'msg_1', 'cus_1', 2, 20, 6, 200, NULL, NULL, 'success', '{}', '{}', 'ok')",
    )
    .await
    .unwrap();
    let seen = |attempts: Vec<herald::store::entities::attempt::Model>| -> Vec<(i32, i64, Option<String>)> {
        attempts.into_iter().map(|a| (a.number, a.started_at, a.response_body)).collect()
    };
    let before = vec![(1, 10, Some("no".to_string())), (2, 20, Some("ok".to_string()))];

    herald::store::migrate(&db).await.unwrap();
    assert_eq!(seen(for_message(&db, &"msg_1".into()).await.unwrap()), before);
    let again = "INSERT INTO attempts (message_id, customer_id, number, started_at, duration_ms, outcome, \
                 request_headers, response_headers) VALUES ('msg_1', 'cus_1', 2, 30, 1, 'success', '{}', '{}')";
    assert!(db.execute_unprepared(again).await.is_err(), "one attempt per message and number");

    down_to(&db, 6).await;
    let ids = db
        .query_all_raw(Statement::from_string(db.get_database_backend(), "SELECT id FROM attempts ORDER BY number"))
        .await
        .unwrap();
    let ids: Vec<String> = ids.iter().map(|row| row.try_get("", "id").unwrap()).collect();
    assert_eq!(ids, ["att_msg_1_1", "att_msg_1_2"]);
    herald::store::migrate(&db).await.unwrap();
    assert_eq!(seen(for_message(&db, &"msg_1".into()).await.unwrap()), before);
}

/// A message row for the tests below, in `state`.
fn message(id: &str, customer_id: &str, event_id: &str, state: &str) -> herald::store::entities::message::Model {
    herald::store::entities::message::Model {
        id: id.into(),
        customer_id: customer_id.into(),
        event_id: event_id.into(),
        subscription_id: "sub_1".into(),
        endpoint_id: "ep_1".into(),
        event_type: "t".into(),
        state: state.parse().expect("a message state"),
        dead_reason: None,
        attempt_count: 0,
        attempt_base: 0,
        ttl_started_at: 0,
        expires_at: 86_400_000,
        next_attempt_at: (state == "pending").then_some(0),
        lease_token: None,
        created_at: 0,
        updated_at: 0,
        delivered_at: None,
        last_status: None,
        first_failed_at: None,
    }
}

/// A repeated publish answers with the event's message ids, which the event
/// row lists since m0008: events stored before it get theirs from their
/// messages, and keep them through a migration down and up again.
#[tokio::test]
async fn events_stored_earlier_get_their_message_ids() {
    use herald::store::events::get;
    use migrations::{Migrator, MigratorTrait};

    let (_test_db, db) = fresh_database().await;
    Migrator::up(&db, Some(7)).await.unwrap();
    db.execute_unprepared(
        "INSERT INTO events (id, customer_id, source, ce_id, event_type, payload, created_at) \
         VALUES ('evt_1', 'cus_1', '/s', 'e1', 't', '{}', 1), ('evt_2', 'cus_1', '/s', 'e2', 't', '{}', 1)",
    )
    .await
    .unwrap();
    // In the columns of the schema as it then was (the model has grown since).
    db.execute_unprepared(
        "INSERT INTO messages (id, customer_id, event_id, subscription_id, endpoint_id, event_type, state, \
         attempt_count, attempt_base, ttl_started_at, expires_at, created_at, updated_at) VALUES \
         ('msg_b', 'cus_1', 'evt_1', 'sub_1', 'ep_1', 't', 'delivered', 0, 0, 0, 86400000, 0, 0), \
         ('msg_a', 'cus_1', 'evt_1', 'sub_1', 'ep_1', 't', 'delivered', 0, 0, 0, 86400000, 0, 0)",
    )
    .await
    .unwrap();
    let ids = |db| async move {
        let mut ids = Vec::new();
        for id in ["evt_1", "evt_2"] {
            ids.push(get(db, &id.into()).await.unwrap().unwrap().message_ids);
        }
        ids
    };

    herald::store::migrate(&db).await.unwrap();
    assert_eq!(ids(&db).await, ["msg_a,msg_b", ""]);
    down_to(&db, 7).await;
    let column = Statement::from_string(db.get_database_backend(), "SELECT message_ids FROM events");
    assert!(db.query_all_raw(column).await.is_err(), "the column goes with the migration");
    herald::store::migrate(&db).await.unwrap();
    assert_eq!(ids(&db).await, ["msg_a,msg_b", ""]);
}

/// The overview's figures from a history stored before the counts were kept
/// (m0015 fills them): messages not delivered counted by state, the delivered
/// ones as the rest, and the last day's attempts per minute for one customer or
/// for all.
#[tokio::test]
async fn the_counts_are_filled_from_the_history_already_stored() {
    use domain::states::MessageState;
    use herald::store::entities::{attempt, customer};
    use herald::store::{bulk, counts, customers, messages};

    let (_test_db, db) = fresh_database().await;
    herald::store::migrate(&db).await.unwrap();
    down_to(&db, 14).await;
    for id in ["cus_a", "cus_b"] {
        customers::insert(&db, customer::Model { id: id.into(), name: id.into(), created_at: 0 }).await.unwrap();
    }
    let rows = vec![
        message("msg_1", "cus_a", "evt_1", "delivered"),
        message("msg_2", "cus_a", "evt_1", "delivered"),
        message("msg_3", "cus_a", "evt_2", "dead"),
        message("msg_4", "cus_a", "evt_3", "pending"),
        message("msg_5", "cus_b", "evt_4", "delivered"),
        message("msg_6", "cus_b", "evt_4", "pending"),
        message("msg_7", "cus_b", "evt_5", "pending"),
    ];
    bulk::insert(&db, &rows).await.unwrap();
    let attempt = |message_id: &str, customer_id: &str, started_at: i64, outcome: &str| attempt::Model {
        message_id: message_id.into(),
        customer_id: customer_id.into(),
        number: 1,
        started_at,
        duration_ms: 1,
        status_code: Some(200),
        error_kind: None,
        error_detail: None,
        outcome: outcome.parse().expect("an outcome"),
        request_headers: "{}".into(),
        response_headers: "{}".into(),
        response_body: None,
        trace_id: None,
    };
    let minute = chrono::Utc::now().timestamp_millis() / 60_000 - 10;
    let tried = vec![
        attempt("msg_1", "cus_a", minute * 60_000, "success"),
        attempt("msg_2", "cus_a", minute * 60_000 + 10_000, "success"),
        attempt("msg_3", "cus_a", minute * 60_000 + 5_000, "permanent"),
        attempt("msg_5", "cus_b", (minute + 1) * 60_000, "success"),
        attempt("msg_6", "cus_b", (minute - 2 * 24 * 60) * 60_000, "retryable"),
    ];
    bulk::insert(&db, &tried).await.unwrap();
    herald::store::migrate(&db).await.unwrap();

    let sorted = |counts: Vec<(MessageState, u64)>| {
        let mut counts: Vec<(String, u64)> =
            counts.into_iter().filter(|(_, n)| *n > 0).map(|(s, n)| (s.as_str().to_string(), n)).collect();
        counts.sort();
        counts
    };
    let counted = |pairs: &[(&str, u64)]| pairs.iter().map(|(s, n)| (s.to_string(), *n)).collect::<Vec<_>>();
    let a = sorted(messages::count_by_state(&db, Some(&"cus_a".into())).await.unwrap());
    assert_eq!(a, counted(&[("dead", 1), ("delivered", 2), ("pending", 1)]));
    let all = sorted(messages::count_by_state(&db, None).await.unwrap());
    assert_eq!(all, counted(&[("dead", 1), ("delivered", 3), ("pending", 3)]));

    let minutes = |mut rows: Vec<(i64, u64, u64)>| {
        rows.sort();
        rows
    };
    let a = minutes(counts::attempts_per_minute(&db, Some(&"cus_a".into()), 0).await.unwrap());
    assert_eq!(a, [(minute, 2, 1)]);
    let all = minutes(counts::attempts_per_minute(&db, None, minute).await.unwrap());
    assert_eq!(all, [(minute, 2, 1), (minute + 1, 1, 0)], "every customer's; none from two days ago");
    assert_eq!(counts::attempts_per_minute(&db, None, minute + 1).await.unwrap(), [(minute + 1, 1, 0)]);
}

/// The pages retention frees go back to the file system: a SQLite file made
/// before incremental auto-vacuum is converted by the migrations.
#[tokio::test]
async fn a_sqlite_file_runs_in_incremental_auto_vacuum() {
    let (_test_db, db) = fresh_database().await;
    if db.get_database_backend() != DbBackend::Sqlite {
        return;
    }
    let mode = || async {
        let row = db.query_one_raw(Statement::from_string(DbBackend::Sqlite, "PRAGMA auto_vacuum")).await.unwrap();
        row.unwrap().try_get_by_index::<i64>(0).unwrap()
    };
    assert_eq!(mode().await, 0, "a plain connection makes a file without auto-vacuum");
    herald::store::migrate(&db).await.unwrap();
    assert_eq!(mode().await, 2, "incremental");
}

/// States are read as the domain's enums: a stored text Herald never writes fails the read, naming
/// the text and its kind, instead of passing for a state it is not.
#[tokio::test]
async fn a_state_herald_never_writes_fails_its_read_by_name() {
    let (_test_db, db) = fresh_database().await;
    herald::store::migrate(&db).await.unwrap();
    let insert = "INSERT INTO endpoints (id, customer_id, url, state, consecutive_failures, window_buckets, \
                  created_at, updated_at) VALUES ('ep_1', 'cus_1', 'https://example.com/hook', 'open', 0, '[]', 0, 0)";
    db.execute_unprepared(insert).await.unwrap();
    let error = herald::store::endpoints::get(&db, &"ep_1".into()).await.unwrap_err().to_string();
    assert!(error.contains("\"open\" is not a known EndpointState"), "{error}");
    db.execute_unprepared("UPDATE endpoints SET state = 'locked'").await.unwrap();
    let endpoint = herald::store::endpoints::get(&db, &"ep_1".into()).await.unwrap().unwrap();
    assert_eq!(endpoint.state, domain::states::EndpointState::Locked);
}
