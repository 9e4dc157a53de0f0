//! Herald: event delivery to webhooks. The `herald` binary and the library
//! that tests start in-process.

pub mod api;
pub mod application;
pub mod clock;
pub mod config;
pub mod ids;
pub mod pipeline;
pub mod secrets;
pub mod service;
pub mod store;
pub mod subscription_secrets;
pub mod telemetry;
pub mod tls;
pub mod ui;

pub use application::Application;
pub use config::Settings;
