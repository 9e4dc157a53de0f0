//! Herald's schema, written with the schema DSL so that the same migrations
//! run on SQLite and PostgreSQL. Times are stored as unix milliseconds
//! (BIGINT): they compare and index the same way on both databases.

pub use sea_orm_migration::prelude::*;

mod m0001_initial;
mod m0002_sessions;
mod m0003_meta;
mod m0004_open_message_indexes;
mod m0005_routing_version;
mod m0006_bytewise_keys;
mod m0007_attempt_key;
mod m0008_fewer_index_entries;
mod m0009_processes;
mod m0010_first_failure;
mod m0011_audit_customer;
mod m0012_incremental_vacuum;
mod m0013_event_archive;
mod m0014_attempt_trace;
mod m0015_counts;
mod m0016_subscription_filter;
mod m0017_event_types;
mod m0018_delivery_options;
mod m0019_subscription_pace;
mod m0020_idempotency_keys;
mod m0021_replays;
mod m0022_portal_links;
mod m0023_series_starts;

/// How queries spell the lanes of the partial indexes: literally, so that a generic plan (PostgreSQL) uses them.
pub use m0004_open_message_indexes::{FRESH as FRESH_LANE, OPEN, RETRY as RETRY_LANE};
/// How queries spell the conditions of the log by state and of an endpoint's waiting messages, for the same reason.
pub use m0008_fewer_index_entries::{UNDELIVERED, WAITING};
/// How long the per-minute attempt counts are kept.
pub use m0015_counts::MINUTES_KEPT as ATTEMPT_MINUTES_KEPT;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m0001_initial::Migration),
            Box::new(m0002_sessions::Migration),
            Box::new(m0003_meta::Migration),
            Box::new(m0004_open_message_indexes::Migration),
            Box::new(m0005_routing_version::Migration),
            Box::new(m0006_bytewise_keys::Migration),
            Box::new(m0007_attempt_key::Migration),
            Box::new(m0008_fewer_index_entries::Migration),
            Box::new(m0009_processes::Migration),
            Box::new(m0010_first_failure::Migration),
            Box::new(m0011_audit_customer::Migration),
            Box::new(m0012_incremental_vacuum::Migration),
            Box::new(m0013_event_archive::Migration),
            Box::new(m0014_attempt_trace::Migration),
            Box::new(m0015_counts::Migration),
            Box::new(m0016_subscription_filter::Migration),
            Box::new(m0017_event_types::Migration),
            Box::new(m0018_delivery_options::Migration),
            Box::new(m0019_subscription_pace::Migration),
            Box::new(m0020_idempotency_keys::Migration),
            Box::new(m0021_replays::Migration),
            Box::new(m0022_portal_links::Migration),
            Box::new(m0023_series_starts::Migration),
        ]
    }
}
