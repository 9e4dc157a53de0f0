//! What the dashboard asks of the server. The server implements this trait
//! over its services and hands it to Leptos through context; server functions
//! call it, so no SQL or business rule lives in the UI.

use std::sync::Arc;

use async_trait::async_trait;
use http::request::Parts;
use serde_json::Value;

use super::UiError;
use domain::dto::*;
pub use domain::dto::{ArchiveFilter, LogFilter};

pub type SharedBackend = Arc<dyn Backend>;

#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The logged-in user of this request, if any.
    async fn viewer(&self, request: &Parts) -> Option<Viewer>;
    async fn login(&self, request: &Parts, username: &str, password: &str) -> Result<Viewer, UiError>;
    async fn logout(&self, request: &Parts);

    async fn overview(&self, v: &Viewer) -> Result<Overview, UiError>;

    async fn subscriptions(&self, v: &Viewer, cursor: Option<String>) -> Result<Page<Subscription>, UiError>;
    async fn subscription(&self, v: &Viewer, id: &str) -> Result<Subscription, UiError>;
    /// `body` has the REST API's fields (see `/api/openapi.json`).
    async fn create_subscription(&self, v: &Viewer, body: Value) -> Result<Subscription, UiError>;
    async fn update_subscription(&self, v: &Viewer, id: &str, body: Value) -> Result<Subscription, UiError>;
    async fn rotate_secret(&self, v: &Viewer, id: &str) -> Result<Subscription, UiError>;
    /// Publishes a `herald.test` event to this subscription alone; returns the message id.
    async fn send_test_event(&self, v: &Viewer, id: &str) -> Result<String, UiError>;

    async fn messages(&self, v: &Viewer, filter: LogFilter, cursor: Option<String>) -> Result<Page<LogEntry>, UiError>;
    async fn message(&self, v: &Viewer, id: &str) -> Result<MessageDetail, UiError>;
    async fn replay(&self, v: &Viewer, id: &str) -> Result<Message, UiError>;
    /// Replays the dead messages that match; returns how many.
    async fn replay_dead(&self, v: &Viewer, filter: LogFilter) -> Result<u64, UiError>;

    /// The subscriptions a filter or form offers (for the admin, of `customer_id` when given).
    async fn subscription_choices(&self, v: &Viewer, customer_id: Option<String>) -> Result<Vec<Choice>, UiError>;
    /// The customers a filter offers the admin.
    async fn customer_choices(&self, v: &Viewer) -> Result<Vec<Choice>, UiError>;

    async fn events(
        &self,
        v: &Viewer,
        filter: ArchiveFilter,
        cursor: Option<String>,
    ) -> Result<Page<EventEntry>, UiError>;
    /// `body` has the fields of `POST /api/v1/events/replay`; returns how many messages were made.
    async fn replay_window(&self, v: &Viewer, body: Value) -> Result<u64, UiError>;
    /// When each attempt of a retry policy (a preset's name or a custom policy) starts if all fail.
    async fn schedule(&self, v: &Viewer, policy: Value) -> Result<Preview, UiError>;

    async fn endpoints(&self, v: &Viewer, cursor: Option<String>) -> Result<Page<Endpoint>, UiError>;
    async fn endpoint_health(&self, v: &Viewer, id: &str) -> Result<EndpointHealth, UiError>;
    /// Replays the dead messages of one kind of failure at the endpoint; returns how many.
    async fn replay_failures(&self, v: &Viewer, id: &str, kind: &str) -> Result<u64, UiError>;
    async fn unlock(&self, v: &Viewer, id: &str, backlog: Backlog) -> Result<Endpoint, UiError>;

    async fn customers(&self, v: &Viewer, cursor: Option<String>) -> Result<Page<Customer>, UiError>;
    async fn create_customer(&self, v: &Viewer, name: &str) -> Result<Customer, UiError>;
    /// Creates a key; its token is kept in memory (never stored) until the
    /// creator reads it once with `take_api_key_token`.
    async fn create_api_key(&self, v: &Viewer, customer_id: &str, name: &str) -> Result<ApiKeyCreated, UiError>;
    async fn take_api_key_token(&self, v: &Viewer, key_id: &str) -> Option<String>;
    async fn users(&self, v: &Viewer) -> Result<Vec<User>, UiError>;
    /// `body` has the REST API's fields: username, password, role, customer_id.
    async fn create_user(&self, v: &Viewer, body: Value) -> Result<User, UiError>;
    async fn audit(&self, v: &Viewer, cursor: Option<String>) -> Result<Page<AuditEntry>, UiError>;
}
