//! Pure rules of Herald: no I/O, no async, no database. Everything here can be
//! tested in microseconds and compiles for the browser too.

pub mod breaker;
pub mod dto;
pub mod errors;
pub mod event;
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
