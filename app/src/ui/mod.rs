//! The dashboard, rendered on the server (it works with JavaScript off):
//! pages read through server functions, forms post to server functions, and
//! every answer is a full page.

#[cfg(feature = "ssr")]
pub mod backend;
mod components;
mod pages;
pub mod server_fns;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Title, provide_meta_context};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::{SsrMode, path};

use pages::*;

/// Why a dashboard call failed, in words a person can act on.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, thiserror::Error)]
pub enum UiError {
    #[error("please log in")]
    NotLoggedIn,
    #[error("not found")]
    NotFound,
    #[error("you can look but not change anything here")]
    Forbidden,
    #[error("{0}")]
    Invalid(String),
    #[error("something went wrong; try again")]
    Internal,
    #[error("Herald's database is unavailable; try again in a few seconds")]
    Unavailable,
}

impl UiError {
    /// Bad fields, each named, on one line.
    pub fn invalid(errors: &[domain::errors::FieldError]) -> UiError {
        UiError::Invalid(errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))
    }
}

/// The HTML document around the app.
pub fn shell() -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="stylesheet" href="/style/main.css"/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Title text="Herald"/>
        <Router>
            <Routes fallback=|| view! { <NotFoundPage/> }>
                <Route path=path!("/login") view=LoginPage ssr=SsrMode::Async/>
                <Route path=path!("/") view=OverviewPage ssr=SsrMode::Async/>
                <Route path=path!("/subscriptions") view=SubscriptionsPage ssr=SsrMode::Async/>
                <Route path=path!("/subscriptions/:id") view=SubscriptionPage ssr=SsrMode::Async/>
                <Route path=path!("/messages") view=MessagesPage ssr=SsrMode::Async/>
                <Route path=path!("/messages/:id") view=MessagePage ssr=SsrMode::Async/>
                <Route path=path!("/events") view=EventsPage ssr=SsrMode::Async/>
                <Route path=path!("/event-types") view=EventTypesPage ssr=SsrMode::Async/>
                <Route path=path!("/endpoints") view=EndpointsPage ssr=SsrMode::Async/>
                <Route path=path!("/endpoints/:id") view=EndpointPage ssr=SsrMode::Async/>
                <Route path=path!("/dead-letters") view=DeadLettersPage ssr=SsrMode::Async/>
                <Route path=path!("/replays/:id") view=ReplayPage ssr=SsrMode::Async/>
                <Route path=path!("/admin/customers") view=CustomersPage ssr=SsrMode::Async/>
                <Route path=path!("/admin/audit") view=AuditPage ssr=SsrMode::Async/>
            </Routes>
        </Router>
    }
}
