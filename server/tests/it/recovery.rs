//! Recovery after a crash on SQLite: one process serves a database file, and
//! at start it takes back the leases a dead process left, so their messages go
//! out at once instead of after the lease. These tests use SQLite files of
//! their own, whichever database the run uses: the rule is SQLite's.

use crate::common;

use common::{TestApp, TestReceiver};
use herald::store::messages::{Among, Lane, claim};
use serde_json::json;

/// A SQLite file for one test, removed with its companions afterwards.
struct SqliteFile(std::path::PathBuf);

impl SqliteFile {
    fn new() -> SqliteFile {
        SqliteFile(std::env::temp_dir().join(format!("herald_recovery_{}.db", ulid::Ulid::new())))
    }

    fn url(&self) -> String {
        format!("sqlite://{}?mode=rwc", self.0.display())
    }
}

impl Drop for SqliteFile {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

#[tokio::test]
async fn a_second_process_on_the_same_sqlite_file_refuses_to_start_naming_it() {
    let file = SqliteFile::new();
    let url = file.url();
    let first = TestApp::start_with(|s| s.database_url = url.clone()).await;
    let refused = herald::Application::build(common::settings_for(&url)).await.err().expect("the file is taken");
    let message = refused.to_string();
    assert!(message.contains(&file.0.display().to_string()), "names the file: {message}");
    assert!(message.contains("another herald process"), "{message}");
    first.crash().await;
}

#[tokio::test]
async fn after_a_crash_the_next_start_sends_the_dead_processes_leased_messages_at_once() {
    let file = SqliteFile::new();
    let url = file.url();
    let rx = TestReceiver::start().await;
    let app = TestApp::start_with(|s| s.database_url = url.clone()).await;
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "s", "url": format!("{}/hook", rx.url), "event_types": ["*"]})).await;
    for i in 0..3 {
        app.publish(&key, &format!("e{i}"), "order.created").await;
    }
    // The process leases them for 90 s, then dies before any is sent.
    let now = app.now_ms();
    let leased = claim(&app.services.db, Lane::Fresh, now, 10, now + 90_000, 7, Among::AllBut(&[])).await.unwrap();
    assert_eq!(leased.len(), 3);
    app.crash().await;

    let restarted = TestApp::start_with(|s| s.database_url = url.clone()).await;
    assert_eq!(restarted.deliver_fresh().await, 0, "leased messages are not first attempts due now");
    assert_eq!(restarted.deliver_retries().await, 3, "the retry lane sends them at once, not after their lease");
    assert_eq!(rx.seen().len(), 3);
    let (_, log) = restarted.get("/api/v1/messages", &key).await;
    for message in log["data"].as_array().unwrap() {
        assert_eq!(message["state"], "delivered", "{message}");
        assert_eq!(message["attempt_count"], 1, "the dead process's lease spent no attempt: {message}");
    }
    restarted.crash().await;
}

/// On a shared database each process numbers its lease tokens; the leases of
/// a process silent for more than ten seconds are taken back by the others,
/// and a live one's are left alone.
#[tokio::test]
async fn a_silent_processes_leases_are_taken_back_and_a_live_ones_are_not() {
    use herald::pipeline::heartbeat::SILENT_MS;
    use herald::store::processes;

    let rx = TestReceiver::start().await;
    let app = TestApp::start().await;
    let (_, key) = app.customer("acme").await;
    app.subscribe(&key, json!({"name": "s", "url": format!("{}/hook", rx.url), "event_types": ["*"]})).await;
    for i in 0..4 {
        app.publish(&key, &format!("e{i}"), "order.created").await;
    }
    let db = &app.services.db;
    let now = app.now_ms();
    let alive = processes::register(db, "alive", now).await.unwrap();
    let silent = processes::register(db, "silent", now - SILENT_MS - 1_000).await.unwrap();
    for process in [alive, silent] {
        let token = processes::lease_token(process);
        let leased = claim(db, Lane::Fresh, now, 2, now + 90_000, token, Among::AllBut(&[])).await.unwrap();
        assert_eq!(leased.len(), 2);
    }
    assert!(processes::beat(db, alive, now).await.unwrap());

    assert_eq!(processes::silent(db, now - SILENT_MS).await.unwrap(), vec![silent]);
    assert_eq!(processes::take_back(db, silent, now).await.unwrap(), 2, "the silent process's two leases");
    assert!(!processes::beat(db, silent, now).await.unwrap(), "a process taken for dead is forgotten");
    assert_eq!(app.deliver_retries().await, 2, "its messages are due at once");
    assert_eq!(rx.seen().len(), 2, "the live process's leased messages are not sent again");
}
