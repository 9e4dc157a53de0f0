//! Herald: event delivery to webhooks. The `herald` binary and the library
//! that tests start in-process.

pub mod api;
pub mod application;
pub mod clock;
pub mod config;
pub mod ids;
pub mod secrets;
pub mod service;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod ui;
pub mod worker;

pub use application::Application;
pub use config::Settings;
