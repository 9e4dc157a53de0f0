//! SeaORM entities, one per table. Times are unix milliseconds.

pub mod api_key;
pub mod attempt;
pub mod audit;
pub mod customer;
pub mod endpoint;
pub mod event;
pub mod event_type;
pub mod idempotency_key;
pub mod message;
pub mod meta;
pub mod portal_link;
pub mod process;
pub mod replay;
pub mod session;
pub mod subscription;
pub mod user;
