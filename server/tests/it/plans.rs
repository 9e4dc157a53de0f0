//! How PostgreSQL plans Herald's hottest statements, on a database as fresh
//! as a new installation's: plans made then are kept while the tables grow.
//! PostgreSQL only: on SQLite these tests say they are skipped (SQLite's plans
//! of the same statements are checked by `store::messages::plans`).

use crate::common;

use sea_orm::{Database, DbBackend};

#[tokio::test]
async fn postgres_the_recorder_keeps_one_plan_that_finds_each_message_by_its_key() {
    let test_db = common::TestDb::new().await;
    let db = Database::connect(&test_db.url).await.unwrap();
    if db.get_database_backend() != DbBackend::Postgres {
        eprintln!("skipped: a PostgreSQL plan; set TEST_DATABASE_URL to a PostgreSQL database to run it");
        return;
    }
    herald::store::migrate(&db).await.unwrap();
    let (plan, generic) = herald::store::messages::recording_plan(&db).await.unwrap();
    let plan = plan.join("\n");
    assert!(generic, "planned for each batch:\n{plan}");
    assert!(plan.contains("Index Scan using messages_pkey on messages"), "{plan}");
    for slow in ["Seq Scan on messages", "Hash Join", "Merge Join"] {
        assert!(!plan.contains(slow), "{slow}:\n{plan}");
    }
    db.close().await.unwrap();
}
