//! Pieces every page uses: the frame with its navigation, state badges,
//! notices, times, and the "next page" link.

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use super::server_fns::{Logout, get_viewer};
use crate::domain::dto::Viewer;

/// The page frame: navigation for the logged-in user, and the page's content.
/// Pages that need a login render their content only when `viewer` is known.
#[component]
pub fn Frame(title: &'static str, children: ChildrenFn) -> impl IntoView {
    let viewer = Resource::new(|| (), |_| get_viewer());
    let logout = ServerAction::<Logout>::new();
    view! {
        <leptos_meta::Title text=format!("{title} · Herald")/>
        <header class="top">
            <a class="brand" href="/">"Herald"</a>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    viewer.await.ok().flatten().map(|v: Viewer| {
                        let admin = v.is_admin();
                        view! {
                            <nav aria-label="Main">
                                <a href="/">"Overview"</a>
                                <a href="/subscriptions">"Subscriptions"</a>
                                <a href="/messages">"Delivery log"</a>
                                <a href="/endpoints">"Endpoints"</a>
                                <a href="/dead-letters">"Dead letters"</a>
                                {admin.then(|| view! {
                                    <a href="/admin/customers">"Customers"</a>
                                    <a href="/admin/audit">"Audit log"</a>
                                })}
                            </nav>
                            <ActionForm action=logout attr:class="logout">
                                <span class="who">{v.username.clone()} " (" {v.role.as_str()} ")"</span>
                                <button type="submit">"Log out"</button>
                            </ActionForm>
                        }
                    })
                })}
            </Suspense>
        </header>
        <main>
            <h1>{title}</h1>
            {children()}
        </main>
    }
}

/// An endpoint's or a message's state as a labelled badge.
#[component]
pub fn Badge(text: String) -> impl IntoView {
    let class = format!("badge badge-{text}");
    view! { <span class=class>{text}</span> }
}

/// A notice shown after an action when the URL carries `key`.
#[component]
pub fn Notice(key: &'static str, text: &'static str) -> impl IntoView {
    let query = use_query_map();
    move || query.read().get(key).map(|_| view! { <p class="notice" role="status">{text}</p> })
}

/// A failed action's message (carried back in the URL when JavaScript is off).
pub fn action_error(
    value: impl Get<Value = Option<Result<(), ServerFnError>>> + Send + Sync + 'static,
) -> impl IntoView {
    move || {
        value.get().and_then(|r| r.err()).map(|e| {
            let text = match e {
                ServerFnError::ServerError(text) => text,
                other => other.to_string(),
            };
            view! { <p class="error" role="alert">{text}</p> }
        })
    }
}

/// Answers the page with 404 Not Found; the page itself says there is nothing here.
pub fn not_found_status() {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
}

/// A load error in place of the page's content.
pub fn load_error(e: ServerFnError) -> AnyView {
    let text = match e {
        ServerFnError::ServerError(text) => text,
        other => other.to_string(),
    };
    view! { <p class="error" role="alert">{text}</p> }.into_any()
}

pub fn time(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

pub fn maybe_time(t: &Option<DateTime<Utc>>) -> String {
    t.as_ref().map(time).unwrap_or_else(|| "—".into())
}

/// A link to the next page, keeping the other query parameters.
#[component]
pub fn NextPage(next: Option<String>) -> impl IntoView {
    let query = use_query_map();
    next.map(|cursor| {
        let mut params: Vec<(String, String)> = query
            .read_untracked()
            .clone()
            .into_iter()
            .filter(|(k, _)| k != "cursor")
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        params.push(("cursor".into(), cursor));
        let qs = params.iter().map(|(k, v)| format!("{k}={}", urlencode(v))).collect::<Vec<_>>().join("&");
        view! { <p class="pager"><a rel="next" href=format!("?{qs}")>"Next page →"</a></p> }
    })
}

pub fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}
