//! The dashboard's `Backend`: the logged-in user from the session, and every
//! page's reads and writes through the same services as the REST API.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use app::ui::UiError;
use app::ui::backend::{ArchiveFilter, Backend, LogFilter};
use async_trait::async_trait;
use axum::http::request::Parts;
use domain::dto::*;
use domain::ids::{ApiKeyId, CustomerId, EndpointId, MessageId, ReplayId, SubscriptionId, UserId};
use domain::policy::RetryPolicy;
use domain::query::{AuditQuery, EventQuery, MessageQuery, ReadQuery};
use domain::request::{
    BulkReplayBody, EventTypeBody, EventTypePatch, FilterPreviewBody, NameBody, ReadBody, ReplayWindowBody,
    SendExampleBody, SubscriptionBody, SubscriptionPatch, UserBody,
};
use domain::states::{PortalRole, Role};
use serde::{Deserialize, Serialize};
use tower_sessions::Session;

use crate::service::{
    self, Principal, ServiceError, Services, audit, console, customers, endpoint_health, endpoints, event_types,
    events, messages, policies, replays, subscriptions, users,
};

/// The session's logged-in user, or the portal link it was opened by.
pub(super) const USER_KEY: &str = "user_id";
pub(super) const PORTAL_KEY: &str = "portal";

/// What a session opened by a portal link holds: whom it acts for, as what.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct PortalGrant {
    pub link_id: String,
    pub customer_id: String,
    pub customer_name: String,
    pub role: PortalRole,
    pub return_url: Option<String>,
    /// When the session ends (unix milliseconds), kept with it so that nothing can extend it.
    pub ends_at: i64,
}

impl PortalGrant {
    fn viewer(self) -> Viewer {
        Viewer {
            user_id: format!("portal:{}", self.link_id),
            username: self.customer_name.clone(),
            role: self.role.role(),
            customer_id: Some(self.customer_id),
            portal: Some(PortalSession {
                link_id: self.link_id,
                customer_name: self.customer_name,
                return_url: self.return_url,
            }),
        }
    }
}
/// How long a new API key's token waits to be shown.
const TOKEN_SHOWN_FOR: Duration = Duration::from_secs(300);

pub struct DashboardBackend {
    services: Services,
    /// New API keys' tokens, by (user id, key id), kept only in memory until shown once.
    new_tokens: Mutex<HashMap<(String, String), (String, Instant)>>,
}

impl DashboardBackend {
    pub fn new(services: Services) -> Self {
        DashboardBackend { services, new_tokens: Mutex::default() }
    }
}

fn ui_error(e: ServiceError) -> UiError {
    match e {
        ServiceError::NotFound(_) | ServiceError::NotFoundField { .. } | ServiceError::Forbidden => UiError::NotFound,
        ServiceError::ReadOnly => UiError::Forbidden,
        ServiceError::Invalid(errors) => UiError::invalid(&errors),
        ServiceError::Conflict(text) => UiError::Invalid(text),
        ServiceError::Db(e) => {
            tracing::error!(error = %e, "database error in the dashboard");
            UiError::Internal
        }
        ServiceError::Unavailable(_) => UiError::Unavailable,
        ServiceError::Unsealable(e) => {
            tracing::error!(error = %e, "opening a subscription secret failed in the dashboard");
            UiError::Internal
        }
    }
}

/// Whom the services see: only the `admin` role acts as the admin; a customer's user or portal
/// session acts for its customer, a viewer only reads.
fn principal(v: &Viewer) -> Principal {
    let actor = match &v.portal {
        Some(portal) => format!("portal:{}", portal.link_id),
        None => format!("user:{}", v.username),
    };
    let customer_id = || CustomerId::from(v.customer_id.clone().unwrap_or_default());
    match v.role {
        Role::Admin => Principal::Admin { actor },
        Role::Customer => Principal::Customer { customer_id: customer_id(), actor },
        Role::Viewer => Principal::Viewer { customer_id: customer_id(), actor },
    }
}

fn user_viewer(user: User) -> Viewer {
    Viewer { user_id: user.id, username: user.username, role: user.role, customer_id: user.customer_id, portal: None }
}

/// A form's filters read as the API reads the same query parameters.
fn read_query<Q: ReadQuery>(fields: &[(&str, &Option<String>)]) -> Result<Q, UiError> {
    let pairs: Vec<(String, String)> = fields
        .iter()
        .filter_map(|(name, value)| value.as_ref().map(|value| (name.to_string(), value.clone())))
        .collect();
    Q::read(&pairs).map_err(|errors| ui_error(ServiceError::from(errors)))
}

fn page(cursor: Option<String>) -> Result<service::PageRequest, UiError> {
    service::page_request(None, cursor.as_deref()).map_err(ui_error)
}

fn session(request: &Parts) -> Option<Session> {
    request.extensions.get::<Session>().cloned()
}

#[async_trait]
impl Backend for DashboardBackend {
    async fn viewer(&self, request: &Parts) -> Option<Viewer> {
        let session = session(request)?;
        let Some(user_id) = session.get::<String>(USER_KEY).await.ok()? else {
            let grant = session.get::<PortalGrant>(PORTAL_KEY).await.ok()??;
            return (grant.ends_at > self.services.now_ms()).then(|| grant.viewer());
        };
        let row = users::get(&self.services, &UserId::from(user_id)).await.ok()??;
        Some(user_viewer(users::view(row)))
    }

    async fn login(&self, request: &Parts, username: &str, password: &str) -> Result<Viewer, UiError> {
        let session = session(request).ok_or(UiError::Internal)?;
        let user = users::verify_login(&self.services, username, password)
            .await
            .map_err(ui_error)?
            .ok_or_else(|| UiError::Invalid("Wrong username or password.".into()))?;
        // A new id at login: a session id known before login is worth nothing after it.
        session.cycle_id().await.map_err(|_| UiError::Internal)?;
        session.remove_value(PORTAL_KEY).await.map_err(|_| UiError::Internal)?;
        session.insert(USER_KEY, &user.id).await.map_err(|_| UiError::Internal)?;
        Ok(user_viewer(users::view(user)))
    }

    async fn logout(&self, request: &Parts) {
        if let Some(session) = session(request) {
            let _ = session.flush().await;
        }
    }

    async fn overview(&self, v: &Viewer) -> Result<Overview, UiError> {
        service::overview::overview(&self.services, &principal(v)).await.map_err(ui_error)
    }

    async fn subscriptions(&self, v: &Viewer, cursor: Option<String>) -> Result<Page<Subscription>, UiError> {
        subscriptions::list(&self.services, &principal(v), None, page(cursor)?).await.map_err(ui_error)
    }

    async fn subscription(&self, v: &Viewer, id: &SubscriptionId) -> Result<Subscription, UiError> {
        subscriptions::get(&self.services, &principal(v), id).await.map_err(ui_error)
    }

    async fn create_subscription(&self, v: &Viewer, body: SubscriptionBody) -> Result<Subscription, UiError> {
        subscriptions::create(&self.services, &principal(v), body).await.map_err(ui_error)
    }

    async fn update_subscription(
        &self,
        v: &Viewer,
        id: &SubscriptionId,
        patch: SubscriptionPatch,
    ) -> Result<Subscription, UiError> {
        subscriptions::update(&self.services, &principal(v), id, patch).await.map_err(ui_error)
    }

    async fn rotate_secret(&self, v: &Viewer, id: &SubscriptionId) -> Result<Subscription, UiError> {
        subscriptions::rotate_secret(&self.services, &principal(v), id).await.map_err(ui_error)
    }

    async fn event_types(&self, v: &Viewer, cursor: Option<String>) -> Result<Page<EventType>, UiError> {
        event_types::list(&self.services, &principal(v), None, page(cursor)?).await.map_err(ui_error)
    }

    async fn event_type(&self, v: &Viewer, customer_id: Option<String>, name: &str) -> Result<EventType, UiError> {
        event_types::get(&self.services, &principal(v), customer_id.as_deref(), name).await.map_err(ui_error)
    }

    async fn create_event_type(&self, v: &Viewer, body: EventTypeBody) -> Result<EventType, UiError> {
        event_types::create(&self.services, &principal(v), body).await.map_err(ui_error)
    }

    async fn update_event_type(
        &self,
        v: &Viewer,
        customer_id: Option<String>,
        name: &str,
        patch: EventTypePatch,
    ) -> Result<EventType, UiError> {
        let who = principal(v);
        event_types::update(&self.services, &who, customer_id.as_deref(), name, patch).await.map_err(ui_error)
    }

    async fn delete_event_type(&self, v: &Viewer, customer_id: Option<String>, name: &str) -> Result<(), UiError> {
        event_types::delete(&self.services, &principal(v), customer_id.as_deref(), name).await.map_err(ui_error)
    }

    async fn preview_filter(&self, v: &Viewer, body: FilterPreviewBody) -> Result<Vec<FilterMatch>, UiError> {
        subscriptions::preview_filter(&self.services, &principal(v), body).await.map_err(ui_error)
    }

    async fn send_example(
        &self,
        v: &Viewer,
        id: &SubscriptionId,
        body: SendExampleBody,
    ) -> Result<PublishResult, UiError> {
        events::send_example(&self.services, &principal(v), id, body).await.map_err(ui_error)
    }

    async fn send_test_event(&self, v: &Viewer, id: &SubscriptionId) -> Result<MessageId, UiError> {
        events::send_test(&self.services, &principal(v), id).await.map_err(ui_error)
    }

    async fn messages(&self, v: &Viewer, filter: LogFilter, cursor: Option<String>) -> Result<Page<LogEntry>, UiError> {
        let query: MessageQuery = read_query(&[
            ("event_id", &filter.event_id),
            ("customer_id", &filter.customer_id),
            ("subscription_id", &filter.subscription_id),
            ("state", &filter.state),
            ("event_type", &filter.event_type),
            ("since", &filter.since),
            ("until", &filter.until),
        ])?;
        let who = principal(v);
        let page = messages::list(&self.services, &who, &query, page(cursor)?).await.map_err(ui_error)?;
        console::log_entries(&self.services, &who, page).await.map_err(ui_error)
    }

    async fn message(&self, v: &Viewer, id: &MessageId) -> Result<MessageView, UiError> {
        let who = principal(v);
        let detail = messages::detail(&self.services, &who, id).await.map_err(ui_error)?;
        let one = Page::of(vec![detail.message.clone()], None);
        let entry = console::log_entries(&self.services, &who, one).await.map_err(ui_error)?.data.pop();
        let owners = entry.map(|entry| entry.owners).unwrap_or_default();
        Ok(MessageView { detail, owners })
    }

    async fn replay(&self, v: &Viewer, id: &MessageId) -> Result<Message, UiError> {
        messages::replay_one(&self.services, &principal(v), id).await.map_err(ui_error)
    }

    async fn replay_dead(&self, v: &Viewer, filter: LogFilter) -> Result<ReplayStarted, UiError> {
        // The filter's fields read as the bulk replay's body reads them.
        let body = BulkReplayBody::read_form(&[
            ("state", Some("dead".into())),
            ("subscription_id", filter.subscription_id),
            ("event_type", filter.event_type),
            ("since", filter.since),
            ("until", filter.until),
        ])
        .map_err(|errors| UiError::invalid(&errors))?;
        replays::start_messages(&self.services, &principal(v), body).await.map_err(ui_error)
    }

    async fn replay_job(&self, v: &Viewer, id: &ReplayId) -> Result<Replay, UiError> {
        replays::get(&self.services, &principal(v), id).await.map_err(ui_error)
    }

    async fn cancel_replay(&self, v: &Viewer, id: &ReplayId) -> Result<Replay, UiError> {
        replays::cancel(&self.services, &principal(v), id).await.map_err(ui_error)
    }

    async fn subscription_choices(&self, v: &Viewer, customer_id: Option<String>) -> Result<Vec<Choice>, UiError> {
        console::subscription_choices(&self.services, &principal(v), customer_id.as_deref()).await.map_err(ui_error)
    }

    async fn customer_choices(&self, v: &Viewer) -> Result<Vec<Choice>, UiError> {
        console::customer_choices(&self.services, &principal(v)).await.map_err(ui_error)
    }

    async fn events(
        &self,
        v: &Viewer,
        filter: ArchiveFilter,
        cursor: Option<String>,
    ) -> Result<Page<EventEntry>, UiError> {
        let who = principal(v);
        let page = match filter.event_id {
            Some(ce_id) => {
                let found = events::with_id(&self.services, &who, filter.customer_id.as_deref(), &ce_id)
                    .await
                    .map_err(ui_error)?;
                Page::of(found, None)
            }
            None => {
                let query: EventQuery = read_query(&[
                    ("customer_id", &filter.customer_id),
                    ("source", &filter.source),
                    ("type", &filter.event_type),
                    ("since", &filter.since),
                    ("until", &filter.until),
                ])?;
                events::list_with_customers(&self.services, &who, &query, page(cursor)?).await.map_err(ui_error)?
            }
        };
        console::event_entries(&self.services, &who, page).await.map_err(ui_error)
    }

    async fn replay_window(&self, v: &Viewer, body: ReplayWindowBody) -> Result<ReplayStarted, UiError> {
        replays::start_events(&self.services, &principal(v), body).await.map_err(ui_error)
    }

    async fn schedule(&self, _v: &Viewer, policy: &RetryPolicy) -> Result<Preview, UiError> {
        Ok(policies::preview(policy))
    }

    async fn endpoint_health(&self, v: &Viewer, id: &EndpointId) -> Result<EndpointHealth, UiError> {
        endpoint_health::health(&self.services, &principal(v), id).await.map_err(ui_error)
    }

    async fn replay_failures(&self, v: &Viewer, id: &EndpointId, kind: &str) -> Result<ReplayStarted, UiError> {
        endpoint_health::replay_failures(&self.services, &principal(v), id, kind).await.map_err(ui_error)
    }

    async fn endpoints(&self, v: &Viewer, cursor: Option<String>) -> Result<Page<Endpoint>, UiError> {
        endpoints::list(&self.services, &principal(v), None, page(cursor)?).await.map_err(ui_error)
    }

    async fn unlock(&self, v: &Viewer, id: &EndpointId, backlog: Backlog) -> Result<Endpoint, UiError> {
        endpoints::unlock(&self.services, &principal(v), id, backlog).await.map_err(ui_error)
    }

    async fn customers(&self, v: &Viewer, cursor: Option<String>) -> Result<Page<Customer>, UiError> {
        customers::list(&self.services, &principal(v), page(cursor)?).await.map_err(ui_error)
    }

    async fn create_customer(&self, v: &Viewer, body: NameBody) -> Result<Customer, UiError> {
        customers::create(&self.services, &principal(v), body).await.map_err(ui_error)
    }

    async fn create_api_key(
        &self,
        v: &Viewer,
        customer_id: &CustomerId,
        body: NameBody,
    ) -> Result<ApiKeyCreated, UiError> {
        let key =
            customers::create_api_key(&self.services, &principal(v), customer_id, body).await.map_err(ui_error)?;
        let mut tokens = self.new_tokens.lock().expect("tokens lock");
        tokens.retain(|_, (_, at)| at.elapsed() < TOKEN_SHOWN_FOR);
        tokens.insert((v.user_id.clone(), key.id.clone()), (key.token.clone(), Instant::now()));
        Ok(key)
    }

    async fn take_api_key_token(&self, v: &Viewer, key_id: &ApiKeyId) -> Option<String> {
        if !v.is_admin() {
            return None;
        }
        let mut tokens = self.new_tokens.lock().expect("tokens lock");
        let (token, at) = tokens.remove(&(v.user_id.clone(), key_id.to_string()))?;
        (at.elapsed() < TOKEN_SHOWN_FOR).then_some(token)
    }

    async fn users(&self, v: &Viewer) -> Result<Vec<User>, UiError> {
        users::list(&self.services, &principal(v)).await.map_err(ui_error)
    }

    async fn create_user(&self, v: &Viewer, body: UserBody) -> Result<User, UiError> {
        users::create(&self.services, &principal(v), body).await.map_err(ui_error)
    }

    async fn audit(&self, v: &Viewer, cursor: Option<String>) -> Result<Page<AuditEntry>, UiError> {
        let who = principal(v);
        who.require_admin().map_err(ui_error)?;
        audit::list(&self.services, &who, &AuditQuery::default(), page(cursor)?).await.map_err(ui_error)
    }
}
