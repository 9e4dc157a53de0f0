//! Server functions: the dashboard's reads and writes. Each resolves the
//! logged-in user and calls the server's `Backend`; writes answer with a
//! redirect to the page that shows their result (forms work without JavaScript).

use leptos::prelude::*;

#[cfg(feature = "ssr")]
use crate::ui::components::urlencode;
use domain::dto::*;

#[cfg(feature = "ssr")]
mod ssr {
    use leptos::prelude::*;

    use super::super::UiError;
    use super::super::backend::SharedBackend;
    use domain::dto::Viewer;

    pub fn backend() -> (SharedBackend, http::request::Parts) {
        (expect_context::<SharedBackend>(), expect_context::<http::request::Parts>())
    }

    /// The logged-in user, or a redirect to the login page.
    pub async fn viewer() -> Result<(SharedBackend, Viewer), ServerFnError> {
        let (backend, parts) = backend();
        match backend.viewer(&parts).await {
            Some(viewer) => Ok((backend, viewer)),
            None => {
                leptos_axum::redirect("/login");
                Err(ServerFnError::new(UiError::NotLoggedIn.to_string()))
            }
        }
    }

    /// The logged-in user, if it may change things: a viewer's request is refused here, before
    /// its form is read (and by every use case that changes state, whoever calls it).
    pub async fn writer() -> Result<(SharedBackend, Viewer), ServerFnError> {
        let (backend, v) = viewer().await?;
        if !v.can_change() {
            return Err(fail(UiError::Forbidden));
        }
        Ok((backend, v))
    }

    /// A failure as the page shows it; "not found", "forbidden" and "unavailable" also set the status.
    pub fn fail(e: UiError) -> ServerFnError {
        let status = match e {
            UiError::NotFound => Some(http::StatusCode::NOT_FOUND),
            UiError::Forbidden => Some(http::StatusCode::FORBIDDEN),
            UiError::Unavailable => Some(http::StatusCode::SERVICE_UNAVAILABLE),
            _ => None,
        };
        if let (Some(status), Some(response)) = (status, use_context::<leptos_axum::ResponseOptions>()) {
            response.set_status(status);
            if status == http::StatusCode::SERVICE_UNAVAILABLE {
                response.insert_header(http::header::RETRY_AFTER, http::HeaderValue::from_static("2"));
            }
        }
        ServerFnError::new(e.to_string())
    }
}

#[cfg(feature = "ssr")]
use domain::request::{
    EventTypeBody, EventTypePatch, FilterPreviewBody, NameBody, PreviewBody, ReadBody, ReplayWindowBody,
    SendExampleBody, SubscriptionBody, SubscriptionPatch, UnlockBody, UserBody,
};
#[cfg(feature = "ssr")]
use ssr::{fail, viewer, writer};

/// A form's fields that do not read as their body's rules say.
#[cfg(feature = "ssr")]
fn invalid(errors: Vec<domain::errors::FieldError>) -> ServerFnError {
    fail(super::UiError::invalid(&errors))
}

fn text(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

#[server]
pub async fn get_viewer() -> Result<Option<Viewer>, ServerFnError> {
    let (backend, parts) = ssr::backend();
    Ok(backend.viewer(&parts).await)
}

#[server]
pub async fn login(username: String, password: String) -> Result<(), ServerFnError> {
    let (backend, parts) = ssr::backend();
    backend.login(&parts, &username, &password).await.map_err(fail)?;
    leptos_axum::redirect("/");
    Ok(())
}

/// `POST /logout`: a route of its own, so that a plain form (or a script) can end a session.
#[server(prefix = "", endpoint = "logout")]
pub async fn logout() -> Result<(), ServerFnError> {
    let (backend, parts) = ssr::backend();
    backend.logout(&parts).await;
    leptos_axum::redirect("/login");
    Ok(())
}

#[server]
pub async fn get_overview() -> Result<Overview, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.overview(&v).await.map_err(fail)
}

#[server]
pub async fn get_endpoints(cursor: Option<String>) -> Result<Page<Endpoint>, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.endpoints(&v, text(cursor)).await.map_err(fail)
}

#[server]
pub async fn unlock_endpoint(
    id: String,
    backlog: Option<String>,
    older_than_minutes: Option<String>,
    from: Option<String>,
) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    // The form asks for minutes; the body's rule counts seconds.
    let older_than_secs = match text(older_than_minutes).map(|m| m.parse::<i64>()) {
        None => None,
        Some(Ok(minutes)) if (1..=5_270_400).contains(&minutes) => Some((minutes * 60).to_string()),
        Some(_) => {
            let why = "older than: give a whole number of minutes from 1 to 5270400";
            return Err(fail(super::UiError::Invalid(why.into())));
        }
    };
    let UnlockBody(backlog) =
        UnlockBody::read_form(&[("backlog", text(backlog)), ("older_than_secs", older_than_secs)]).map_err(invalid)?;
    let endpoint = backend.unlock(&v, &id.as_str().into(), backlog).await.map_err(fail)?;
    // Back to the page the form was on: the endpoint's own, or the list.
    if text(from).as_deref() == Some("endpoint") {
        leptos_axum::redirect(&format!("/endpoints/{}?unlocked=1", urlencode(&endpoint.id)));
    } else {
        leptos_axum::redirect(&format!("/endpoints?unlocked={}", urlencode(&endpoint.id)));
    }
    Ok(())
}

#[server]
pub async fn get_endpoint_health(id: String) -> Result<EndpointHealth, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.endpoint_health(&v, &id.into()).await.map_err(fail)
}

/// Replays the dead messages of one kind of failure (`503`, `timeout`) at an endpoint.
#[server]
pub async fn replay_failures(id: String, kind: String) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    let started = backend.replay_failures(&v, &id.as_str().into(), &kind).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/replays/{}", urlencode(&started.replay_id)));
    Ok(())
}

#[server]
pub async fn get_subscription_choices(customer_id: Option<String>) -> Result<Vec<Choice>, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.subscription_choices(&v, text(customer_id)).await.map_err(fail)
}

/// The customers to choose from; empty for a customer's user.
#[server]
pub async fn get_customer_choices() -> Result<Vec<Choice>, ServerFnError> {
    let (backend, v) = viewer().await?;
    if !v.is_admin() {
        return Ok(Vec::new());
    }
    backend.customer_choices(&v).await.map_err(fail)
}

/// A retry policy's schedule: `policy` is a preset's name or a custom policy as JSON.
#[server]
pub async fn get_schedule(policy: String) -> Result<Preview, ServerFnError> {
    let (backend, v) = viewer().await?;
    let PreviewBody { retry_policy } = PreviewBody::read_form(&[("retry_policy", Some(policy))]).map_err(invalid)?;
    backend.schedule(&v, &retry_policy).await.map_err(fail)
}

#[server]
pub async fn get_events(filter: ArchiveFilter, cursor: Option<String>) -> Result<Page<EventEntry>, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.events(&v, filter, text(cursor)).await.map_err(fail)
}

/// Replays the archive's events of a time window to one subscription.
#[server]
pub async fn replay_window(
    since: Option<String>,
    until: Option<String>,
    subscription_id: Option<String>,
    event_types: Option<String>,
    source: Option<String>,
) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    let body = ReplayWindowBody::read_form(&[
        ("since", text(since)),
        ("until", text(until)),
        ("subscription_id", text(subscription_id)),
        ("event_types", text(event_types)),
        ("source", text(source)),
    ])
    .map_err(invalid)?;
    let started = backend.replay_window(&v, body).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/replays/{}", urlencode(&started.replay_id)));
    Ok(())
}

#[server]
pub async fn get_subscriptions(cursor: Option<String>) -> Result<Page<Subscription>, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.subscriptions(&v, text(cursor)).await.map_err(fail)
}

#[server]
pub async fn get_subscription(id: String) -> Result<Subscription, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.subscription(&v, &id.into()).await.map_err(fail)
}

#[server]
pub async fn get_event_types(cursor: Option<String>) -> Result<Page<EventType>, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.event_types(&v, text(cursor)).await.map_err(fail)
}

#[server]
pub async fn get_event_type(name: String, customer_id: Option<String>) -> Result<EventType, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.event_type(&v, text(customer_id), &name).await.map_err(fail)
}

/// Adds a type to the catalog; `schema` and `example` are JSON text.
#[server]
pub async fn create_event_type(
    name: Option<String>,
    description: Option<String>,
    schema: Option<String>,
    example: Option<String>,
    customer_id: Option<String>,
) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    let body = EventTypeBody::read_form(&[
        ("name", text(name)),
        ("description", text(description)),
        ("schema", text(schema)),
        ("example", text(example)),
        ("customer_id", text(customer_id)),
    ])
    .map_err(invalid)?;
    let created = backend.create_event_type(&v, body).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/event-types?created={}", urlencode(&created.name)));
    Ok(())
}

/// Changes a type; a field left empty is removed.
#[server]
pub async fn update_event_type(
    name: String,
    customer_id: Option<String>,
    description: Option<String>,
    schema: Option<String>,
    example: Option<String>,
) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    let patch = EventTypePatch::read_form(&[
        ("description", Some(description.unwrap_or_default())),
        ("schema", Some(schema.unwrap_or_default())),
        ("example", Some(example.unwrap_or_default())),
    ])
    .map_err(invalid)?;
    backend.update_event_type(&v, text(customer_id), &name, patch).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/event-types?saved={}", urlencode(&name)));
    Ok(())
}

#[server]
pub async fn delete_event_type(name: String, customer_id: Option<String>) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    backend.delete_event_type(&v, text(customer_id), &name).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/event-types?removed={}", urlencode(&name)));
    Ok(())
}

/// The customer's latest kept events of these types, each with whether the filter matches it
/// (the subscription form's "Test the filter"); the admin names the customer, or the subscription.
#[server]
pub async fn get_filter_preview(
    filter: Option<String>,
    event_types: Option<String>,
    customer_id: Option<String>,
    subscription_id: Option<String>,
) -> Result<Vec<FilterMatch>, ServerFnError> {
    let (backend, v) = viewer().await?;
    let body = FilterPreviewBody::read_form(&[
        ("filter", text(filter)),
        ("event_types", text(event_types)),
        ("customer_id", text(customer_id)),
        ("subscription_id", text(subscription_id)),
    ])
    .map_err(invalid)?;
    backend.preview_filter(&v, body).await.map_err(fail)
}

/// The subscription form's fields, by the names of the REST API's body. The filter's text is sent
/// even when empty: the form's empty filter removes it (a form without the field keeps it).
fn subscription_form(fields: SubscriptionForm) -> [(&'static str, Option<String>); 8] {
    let SubscriptionForm { name, url, event_types, retry_policy, timeout_ms, content_mode, filter, rate_limit_per_sec } =
        fields;
    [
        ("name", text(name)),
        ("url", text(url)),
        ("event_types", text(event_types)),
        ("retry_policy", text(retry_policy)),
        ("timeout_ms", text(timeout_ms)),
        ("content_mode", text(content_mode)),
        ("filter", filter),
        // Blank removes the pace.
        ("rate_limit_per_sec", Some(rate_limit_per_sec.unwrap_or_default())),
    ]
}

/// The subscription form as submitted.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SubscriptionForm {
    name: Option<String>,
    url: Option<String>,
    event_types: Option<String>,
    retry_policy: Option<String>,
    timeout_ms: Option<String>,
    content_mode: Option<String>,
    filter: Option<String>,
    rate_limit_per_sec: Option<String>,
}

#[server]
pub async fn create_subscription(
    #[server(flatten)] form: SubscriptionForm,
    customer_id: Option<String>,
) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    let mut form = subscription_form(form).to_vec();
    form.push(("customer_id", text(customer_id)));
    let body = SubscriptionBody::read_form(&form).map_err(invalid)?;
    let sub = backend.create_subscription(&v, body).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/subscriptions/{}?created=1", sub.id));
    Ok(())
}

#[server]
pub async fn update_subscription(id: String, #[server(flatten)] form: SubscriptionForm) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    let form = subscription_form(form);
    let patch = SubscriptionPatch::read_form(&form).map_err(invalid)?;
    backend.update_subscription(&v, &id.as_str().into(), patch).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/subscriptions/{id}?saved=1"));
    Ok(())
}

#[server]
pub async fn set_subscription_status(id: String, status: String) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    let patch = SubscriptionPatch::read_form(&[("status", Some(status))]).map_err(invalid)?;
    backend.update_subscription(&v, &id.as_str().into(), patch).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/subscriptions/{id}?saved=1"));
    Ok(())
}

#[server]
pub async fn rotate_secret(id: String) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    backend.rotate_secret(&v, &id.as_str().into()).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/subscriptions/{id}?rotated=1"));
    Ok(())
}

/// The delivery form as submitted: the extra headers (one a line), the signature scheme, and the
/// credentials (`auth_kind` `keep` leaves them as they are, `none` removes them). Its `Debug`
/// shows no value: they are secrets.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct DeliveryForm {
    headers: Option<String>,
    signature: Option<String>,
    auth_kind: Option<String>,
    auth_token: Option<String>,
    auth_username: Option<String>,
    auth_password: Option<String>,
    auth_token_url: Option<String>,
    auth_client_id: Option<String>,
    auth_client_secret: Option<String>,
    auth_scope: Option<String>,
}

impl std::fmt::Debug for DeliveryForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliveryForm").field("auth_kind", &self.auth_kind).finish_non_exhaustive()
    }
}

impl DeliveryForm {
    /// The credentials as the API's JSON, to be read by the same rule; `None` to keep them.
    fn auth_json(&self) -> Option<String> {
        let kind = text(self.auth_kind.clone()).unwrap_or_else(|| "keep".into());
        let mut auth = serde_json::Map::new();
        let parts: &[(&str, &Option<String>)] = match kind.as_str() {
            "keep" => return None,
            "none" => return Some(String::new()),
            "bearer" => &[("token", &self.auth_token)],
            "basic" => &[("username", &self.auth_username), ("password", &self.auth_password)],
            _ => &[
                ("token_url", &self.auth_token_url),
                ("client_id", &self.auth_client_id),
                ("client_secret", &self.auth_client_secret),
                ("scope", &self.auth_scope),
            ],
        };
        auth.insert("kind".into(), kind.clone().into());
        for (name, value) in parts {
            if let Some(value) = text((*value).clone()) {
                auth.insert(name.to_string(), value.into());
            }
        }
        Some(serde_json::Value::Object(auth).to_string())
    }
}

#[server]
pub async fn update_delivery(id: String, #[server(flatten)] form: DeliveryForm) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    let mut fields =
        vec![("headers", Some(form.headers.clone().unwrap_or_default())), ("signature", text(form.signature.clone()))];
    if let Some(auth) = form.auth_json() {
        fields.push(("auth", Some(auth)));
    }
    let patch = SubscriptionPatch::read_form(&fields).map_err(invalid)?;
    backend.update_subscription(&v, &id.as_str().into(), patch).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/subscriptions/{id}?saved=1#delivery"));
    Ok(())
}

/// Publishes the catalog's example of `event_type` to this subscription alone.
#[server]
pub async fn send_example(id: String, event_type: Option<String>) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    let body = SendExampleBody::read_form(&[("event_type", text(event_type))]).map_err(invalid)?;
    let published = backend.send_example(&v, &id.into(), body).await.map_err(fail)?;
    let message_id = published.events.first().and_then(|e| e.message_ids.first()).cloned().unwrap_or_default();
    leptos_axum::redirect(&format!("/messages/{message_id}?sent=1"));
    Ok(())
}

#[server]
pub async fn send_test_event(id: String) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    let message_id = backend.send_test_event(&v, &id.into()).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/messages/{message_id}?sent=1"));
    Ok(())
}

#[server]
pub async fn get_messages(filter: LogFilter, cursor: Option<String>) -> Result<Page<LogEntry>, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.messages(&v, filter, text(cursor)).await.map_err(fail)
}

#[server]
pub async fn get_message(id: String) -> Result<MessageView, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.message(&v, &id.into()).await.map_err(fail)
}

#[server]
pub async fn replay_message(id: String) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    backend.replay(&v, &id.as_str().into()).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/messages/{id}?replayed=1"));
    Ok(())
}

#[server]
pub async fn replay_dead(
    subscription_id: Option<String>,
    event_type: Option<String>,
    since: Option<String>,
    until: Option<String>,
) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    let filter = LogFilter {
        event_id: None,
        subscription_id: text(subscription_id),
        state: Some("dead".into()),
        event_type: text(event_type),
        since: text(since),
        until: text(until),
        customer_id: None,
    };
    let started = backend.replay_dead(&v, filter).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/replays/{}", urlencode(&started.replay_id)));
    Ok(())
}

#[server]
pub async fn get_replay(id: String) -> Result<Replay, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.replay_job(&v, &id.as_str().into()).await.map_err(fail)
}

/// Cancels a running replay; back to its page.
#[server]
pub async fn cancel_replay(id: String) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    backend.cancel_replay(&v, &id.as_str().into()).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/replays/{}", urlencode(&id)));
    Ok(())
}

#[server]
pub async fn get_customers(cursor: Option<String>) -> Result<Page<Customer>, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.customers(&v, text(cursor)).await.map_err(fail)
}

#[server]
pub async fn create_customer(name: String) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    let body = NameBody::read_form(&[("name", Some(name))]).map_err(invalid)?;
    let customer = backend.create_customer(&v, body).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/admin/customers?created={}", customer.id));
    Ok(())
}

#[server]
pub async fn create_api_key(customer_id: String, name: String) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    let body = NameBody::read_form(&[("name", Some(name))]).map_err(invalid)?;
    let key = backend.create_api_key(&v, &customer_id.trim().into(), body).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/admin/customers?key={}", key.id));
    Ok(())
}

/// The token of a key just created by this user, once.
#[server]
pub async fn take_api_key_token(key_id: String) -> Result<Option<String>, ServerFnError> {
    let (backend, v) = writer().await?;
    Ok(backend.take_api_key_token(&v, &key_id.into()).await)
}

#[server]
pub async fn get_users() -> Result<Vec<User>, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.users(&v).await.map_err(fail)
}

#[server]
pub async fn create_user(
    username: String,
    password: String,
    role: String,
    customer_id: Option<String>,
) -> Result<(), ServerFnError> {
    let (backend, v) = writer().await?;
    let form = [
        ("username", Some(username)),
        ("password", Some(password)),
        ("role", Some(role)),
        ("customer_id", text(customer_id)),
    ];
    let user = backend.create_user(&v, UserBody::read_form(&form).map_err(invalid)?).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/admin/customers?user={}", user.username));
    Ok(())
}

#[server]
pub async fn get_audit(cursor: Option<String>) -> Result<Page<AuditEntry>, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.audit(&v, text(cursor)).await.map_err(fail)
}
