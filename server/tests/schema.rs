//! The schema as the migrations leave it, on the database under test.

mod common;

use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};

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

#[tokio::test]
async fn every_index_compares_its_text_byte_by_byte() {
    let test_db = common::TestDb::new().await;
    let db = Database::connect(&test_db.url).await.unwrap();
    herald::store::migrate(&db).await.unwrap();
    let keys = text_keys(&db).await;
    let names: Vec<&str> = keys.iter().map(|(key, _)| key.as_str()).collect();
    if db.get_database_backend() == DbBackend::Postgres {
        for held in ["messages_pkey.id", "idx_messages_customer_state.state", "uq_events_customer_source_id.ce_id"] {
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

    let test_db = common::TestDb::new().await;
    let db = Database::connect(&test_db.url).await.unwrap();
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
    assert_eq!(seen(for_message(&db, "msg_1").await.unwrap()), before);
    let again = "INSERT INTO attempts (message_id, customer_id, number, started_at, duration_ms, outcome, \
                 request_headers, response_headers) VALUES ('msg_1', 'cus_1', 2, 30, 1, 'success', '{}', '{}')";
    assert!(db.execute_unprepared(again).await.is_err(), "one attempt per message and number");

    Migrator::down(&db, Some(1)).await.unwrap();
    let ids = db
        .query_all_raw(Statement::from_string(db.get_database_backend(), "SELECT id FROM attempts ORDER BY number"))
        .await
        .unwrap();
    let ids: Vec<String> = ids.iter().map(|row| row.try_get("", "id").unwrap()).collect();
    assert_eq!(ids, ["att_msg_1_1", "att_msg_1_2"]);
    herald::store::migrate(&db).await.unwrap();
    assert_eq!(seen(for_message(&db, "msg_1").await.unwrap()), before);
}
