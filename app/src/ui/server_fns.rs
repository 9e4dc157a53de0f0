//! Server functions: the dashboard's reads and writes. Each resolves the
//! logged-in user and calls the server's `Backend`; writes answer with a
//! redirect to the page that shows their result (forms work without JavaScript).

use leptos::prelude::*;
use serde_json::{Value, json};

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

    /// A failure as the page shows it; "not found" and "unavailable" also set the status.
    pub fn fail(e: UiError) -> ServerFnError {
        let status = match e {
            UiError::NotFound => Some(http::StatusCode::NOT_FOUND),
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
use ssr::{fail, viewer};

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
    let (backend, v) = viewer().await?;
    let minutes = text(older_than_minutes);
    let backlog = match text(backlog).as_deref() {
        None | Some("deliver") => Backlog::Deliver,
        Some("dead") => Backlog::Dead,
        Some("dead_older_than") => match minutes.as_deref().map(str::parse::<i64>) {
            Some(Ok(minutes)) if (1..=5_270_400).contains(&minutes) => Backlog::DeadOlderThan { secs: minutes * 60 },
            _ => {
                return Err(fail(super::UiError::Invalid(
                    "older than: give a whole number of minutes from 1 to 5270400".into(),
                )));
            }
        },
        Some(_) => return Err(fail(super::UiError::Invalid("choose what to do with the held messages".into()))),
    };
    let endpoint = backend.unlock(&v, &id, backlog).await.map_err(fail)?;
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
    backend.endpoint_health(&v, &id).await.map_err(fail)
}

/// Replays the dead messages of one kind of failure (`503`, `timeout`) at an endpoint.
#[server]
pub async fn replay_failures(id: String, kind: String) -> Result<(), ServerFnError> {
    let (backend, v) = viewer().await?;
    let replayed = backend.replay_failures(&v, &id, &kind).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/endpoints/{}?replayed={replayed}", urlencode(&id)));
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
    backend.schedule(&v, policy_value(&policy)).await.map_err(fail)
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
    let (backend, v) = viewer().await?;
    let mut body = serde_json::Map::new();
    for (key, value) in [("since", since), ("until", until), ("subscription_id", subscription_id), ("source", source)] {
        if let Some(value) = text(value) {
            body.insert(key.into(), json!(value));
        }
    }
    if let Some(types) = text(event_types) {
        body.insert("event_types".into(), json!(split_list(&types)));
    }
    let replayed = backend.replay_window(&v, Value::Object(body)).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/events?replayed={replayed}"));
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
    backend.subscription(&v, &id).await.map_err(fail)
}

/// A list typed into one field, separated by commas, spaces or lines.
fn split_list(text: &str) -> Vec<&str> {
    text.split([',', ' ', '\n']).map(str::trim).filter(|t| !t.is_empty()).collect()
}

/// A retry policy as typed: a preset's name, or a custom policy written as JSON.
pub fn policy_value(text: &str) -> Value {
    let text = text.trim();
    serde_json::from_str::<Value>(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// The subscription form's fields as the REST API's JSON body.
fn subscription_body(
    name: Option<String>,
    url: Option<String>,
    event_types: Option<String>,
    retry_policy: Option<String>,
    timeout_ms: Option<String>,
    content_mode: Option<String>,
) -> Value {
    let mut body = serde_json::Map::new();
    if let Some(name) = text(name) {
        body.insert("name".into(), json!(name));
    }
    if let Some(url) = text(url) {
        body.insert("url".into(), json!(url));
    }
    if let Some(types) = text(event_types) {
        body.insert("event_types".into(), json!(split_list(&types)));
    }
    if let Some(policy) = text(retry_policy) {
        body.insert("retry_policy".into(), policy_value(&policy));
    }
    if let Some(timeout) = text(timeout_ms) {
        body.insert("timeout_ms".into(), timeout.parse::<i64>().map(Value::from).unwrap_or(Value::String(timeout)));
    }
    if let Some(mode) = text(content_mode) {
        body.insert("content_mode".into(), json!(mode));
    }
    Value::Object(body)
}

#[server]
pub async fn create_subscription(
    name: Option<String>,
    url: Option<String>,
    event_types: Option<String>,
    retry_policy: Option<String>,
    timeout_ms: Option<String>,
    content_mode: Option<String>,
    customer_id: Option<String>,
) -> Result<(), ServerFnError> {
    let (backend, v) = viewer().await?;
    let mut body = subscription_body(name, url, event_types, retry_policy, timeout_ms, content_mode);
    if let (Some(customer), Value::Object(map)) = (text(customer_id), &mut body) {
        map.insert("customer_id".into(), json!(customer));
    }
    let sub = backend.create_subscription(&v, body).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/subscriptions/{}?created=1", sub.id));
    Ok(())
}

#[server]
pub async fn update_subscription(
    id: String,
    name: Option<String>,
    url: Option<String>,
    event_types: Option<String>,
    retry_policy: Option<String>,
    timeout_ms: Option<String>,
    content_mode: Option<String>,
) -> Result<(), ServerFnError> {
    let (backend, v) = viewer().await?;
    let body = subscription_body(name, url, event_types, retry_policy, timeout_ms, content_mode);
    backend.update_subscription(&v, &id, body).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/subscriptions/{id}?saved=1"));
    Ok(())
}

#[server]
pub async fn set_subscription_status(id: String, status: String) -> Result<(), ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.update_subscription(&v, &id, json!({"status": status})).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/subscriptions/{id}?saved=1"));
    Ok(())
}

#[server]
pub async fn rotate_secret(id: String) -> Result<(), ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.rotate_secret(&v, &id).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/subscriptions/{id}?rotated=1"));
    Ok(())
}

#[server]
pub async fn send_test_event(id: String) -> Result<(), ServerFnError> {
    let (backend, v) = viewer().await?;
    let message_id = backend.send_test_event(&v, &id).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/messages/{message_id}?sent=1"));
    Ok(())
}

#[server]
pub async fn get_messages(filter: LogFilter, cursor: Option<String>) -> Result<Page<LogEntry>, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.messages(&v, filter, text(cursor)).await.map_err(fail)
}

#[server]
pub async fn get_message(id: String) -> Result<MessageDetail, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.message(&v, &id).await.map_err(fail)
}

#[server]
pub async fn replay_message(id: String) -> Result<(), ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.replay(&v, &id).await.map_err(fail)?;
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
    let (backend, v) = viewer().await?;
    let filter = LogFilter {
        event_id: None,
        subscription_id: text(subscription_id),
        state: Some("dead".into()),
        event_type: text(event_type),
        since: text(since),
        until: text(until),
        customer_id: None,
    };
    // Back to the same filter, so the page shows what was replayed.
    let back = {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        for (key, value) in [
            ("subscription_id", &filter.subscription_id),
            ("event_type", &filter.event_type),
            ("since", &filter.since),
            ("until", &filter.until),
        ] {
            if let Some(value) = value {
                query.append_pair(key, value);
            }
        }
        query.finish()
    };
    let replayed = backend.replay_dead(&v, filter).await.map_err(fail)?;
    let separator = if back.is_empty() { "" } else { "&" };
    leptos_axum::redirect(&format!("/dead-letters?{back}{separator}replayed={replayed}"));
    Ok(())
}

#[server]
pub async fn get_customers(cursor: Option<String>) -> Result<Page<Customer>, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.customers(&v, text(cursor)).await.map_err(fail)
}

#[server]
pub async fn create_customer(name: String) -> Result<(), ServerFnError> {
    let (backend, v) = viewer().await?;
    let customer = backend.create_customer(&v, &name).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/admin/customers?created={}", customer.id));
    Ok(())
}

#[server]
pub async fn create_api_key(customer_id: String, name: String) -> Result<(), ServerFnError> {
    let (backend, v) = viewer().await?;
    let key = backend.create_api_key(&v, &customer_id, &name).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/admin/customers?key={}", key.id));
    Ok(())
}

/// The token of a key just created by this user, once.
#[server]
pub async fn take_api_key_token(key_id: String) -> Result<Option<String>, ServerFnError> {
    let (backend, v) = viewer().await?;
    Ok(backend.take_api_key_token(&v, &key_id).await)
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
    let (backend, v) = viewer().await?;
    let body = json!({"username": username, "password": password, "role": role, "customer_id": text(customer_id)});
    let user = backend.create_user(&v, body).await.map_err(fail)?;
    leptos_axum::redirect(&format!("/admin/customers?user={}", user.username));
    Ok(())
}

#[server]
pub async fn get_audit(cursor: Option<String>) -> Result<Page<AuditEntry>, ServerFnError> {
    let (backend, v) = viewer().await?;
    backend.audit(&v, text(cursor)).await.map_err(fail)
}
