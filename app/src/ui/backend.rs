//! What the dashboard asks of the server. The server implements this trait
//! over its services and hands it to Leptos through context; server functions
//! call it, so no SQL or business rule lives in the UI.

use std::sync::Arc;

use async_trait::async_trait;
use domain::ids::{ApiKeyId, CustomerId, EndpointId, MessageId, ReplayId, SubscriptionId};
use domain::policy::RetryPolicy;
use domain::request::{
    EventTypeBody, EventTypePatch, FilterPreviewBody, NameBody, ReplayWindowBody, SendExampleBody, SubscriptionBody,
    SubscriptionPatch, UserBody,
};
use http::request::Parts;

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
    async fn subscription(&self, v: &Viewer, id: &SubscriptionId) -> Result<Subscription, UiError>;
    async fn create_subscription(&self, v: &Viewer, body: SubscriptionBody) -> Result<Subscription, UiError>;
    async fn update_subscription(
        &self,
        v: &Viewer,
        id: &SubscriptionId,
        patch: SubscriptionPatch,
    ) -> Result<Subscription, UiError>;
    async fn rotate_secret(&self, v: &Viewer, id: &SubscriptionId) -> Result<Subscription, UiError>;
    /// The event-type catalog, newest first (every customer's for the admin).
    async fn event_types(&self, v: &Viewer, cursor: Option<String>) -> Result<Page<EventType>, UiError>;
    async fn event_type(&self, v: &Viewer, customer_id: Option<String>, name: &str) -> Result<EventType, UiError>;
    async fn create_event_type(&self, v: &Viewer, body: EventTypeBody) -> Result<EventType, UiError>;
    async fn update_event_type(
        &self,
        v: &Viewer,
        customer_id: Option<String>,
        name: &str,
        patch: EventTypePatch,
    ) -> Result<EventType, UiError>;
    async fn delete_event_type(&self, v: &Viewer, customer_id: Option<String>, name: &str) -> Result<(), UiError>;
    /// A filter tried on the customer's latest kept events of some types, storing nothing.
    async fn preview_filter(&self, v: &Viewer, body: FilterPreviewBody) -> Result<Vec<FilterMatch>, UiError>;
    /// Publishes the catalog's example of a type to this subscription alone.
    async fn send_example(
        &self,
        v: &Viewer,
        id: &SubscriptionId,
        body: SendExampleBody,
    ) -> Result<PublishResult, UiError>;
    /// Publishes a `herald.test` event to this subscription alone; returns the message id.
    async fn send_test_event(&self, v: &Viewer, id: &SubscriptionId) -> Result<MessageId, UiError>;

    async fn messages(&self, v: &Viewer, filter: LogFilter, cursor: Option<String>) -> Result<Page<LogEntry>, UiError>;
    async fn message(&self, v: &Viewer, id: &MessageId) -> Result<MessageView, UiError>;
    async fn replay(&self, v: &Viewer, id: &MessageId) -> Result<Message, UiError>;
    /// Starts replaying the dead messages that match.
    async fn replay_dead(&self, v: &Viewer, filter: LogFilter) -> Result<ReplayStarted, UiError>;
    /// A replay job, and its cancel.
    async fn replay_job(&self, v: &Viewer, id: &ReplayId) -> Result<Replay, UiError>;
    async fn cancel_replay(&self, v: &Viewer, id: &ReplayId) -> Result<Replay, UiError>;

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
    /// Starts replaying a window of the archive to a subscription.
    async fn replay_window(&self, v: &Viewer, body: ReplayWindowBody) -> Result<ReplayStarted, UiError>;
    /// When each attempt of a retry policy starts if all fail.
    async fn schedule(&self, v: &Viewer, policy: &RetryPolicy) -> Result<Preview, UiError>;

    async fn endpoints(&self, v: &Viewer, cursor: Option<String>) -> Result<Page<Endpoint>, UiError>;
    async fn endpoint_health(&self, v: &Viewer, id: &EndpointId) -> Result<EndpointHealth, UiError>;
    /// Starts replaying the dead messages of one kind of failure at the endpoint.
    async fn replay_failures(&self, v: &Viewer, id: &EndpointId, kind: &str) -> Result<ReplayStarted, UiError>;
    async fn unlock(&self, v: &Viewer, id: &EndpointId, backlog: Backlog) -> Result<Endpoint, UiError>;

    async fn customers(&self, v: &Viewer, cursor: Option<String>) -> Result<Page<Customer>, UiError>;
    async fn create_customer(&self, v: &Viewer, body: NameBody) -> Result<Customer, UiError>;
    /// Creates a key; its token is kept in memory (never stored) until the
    /// creator reads it once with `take_api_key_token`.
    async fn create_api_key(
        &self,
        v: &Viewer,
        customer_id: &CustomerId,
        body: NameBody,
    ) -> Result<ApiKeyCreated, UiError>;
    async fn take_api_key_token(&self, v: &Viewer, key_id: &ApiKeyId) -> Option<String>;
    async fn users(&self, v: &Viewer) -> Result<Vec<User>, UiError>;
    async fn create_user(&self, v: &Viewer, body: UserBody) -> Result<User, UiError>;
    async fn audit(&self, v: &Viewer, cursor: Option<String>) -> Result<Page<AuditEntry>, UiError>;
}
