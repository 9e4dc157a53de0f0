//! Herald's integration tests, in one binary: a module per area, all on the
//! harness in `common` (a fresh database per test, the real application on
//! port 0, a recording receiver). `TEST_DATABASE_URL` runs them on PostgreSQL.

mod common;

mod api;
mod catalog;
mod counts;
mod dashboard;
mod delivery;
mod delivery_options;
mod filters;
mod fuzz_cursor;
mod fuzz_event_batch;
mod idempotency;
mod metrics;
mod outage;
mod plans;
mod portal;
mod recovery;
mod reliability;
mod replays;
mod routing;
mod schema;
mod search;
mod traces;
