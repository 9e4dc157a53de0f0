//! Pure rules of Herald: no I/O, no async, no database. Everything here can be
//! tested in microseconds and compiles for the browser too.

pub mod breaker;
#[cfg(feature = "evaluate")]
pub mod data_schema;
pub mod dto;
pub mod errors;
pub mod event;
#[cfg(feature = "evaluate")]
pub mod filter;
pub mod health;
pub mod ids;
pub mod input;
pub mod operational;
pub mod policy;
pub mod query;
pub mod request;
pub mod signing;
pub mod states;
pub mod target;
pub mod trace;
