//! The dashboard's wiring: Leptos pages and server functions under a session
//! (stored in Herald's database) and the cross-site guard, plus the stylesheet.

mod backend;
mod csrf;
mod framing;
mod portal;

use std::sync::{Arc, LazyLock};

use app::ui::backend::SharedBackend;
use app::ui::{App, shell};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::future::BoxFuture;
use leptos::config::LeptosOptions;
use leptos::prelude::provide_context;
use leptos_axum::{AxumRouteListing, LeptosRoutes, generate_route_list};
use tower_sessions::cookie::time::Duration as CookieDuration;
use tower_sessions::{Expiry, SessionManagerLayer};

use crate::service::Services;
use crate::store::health::DatabaseHealth;
use crate::store::sessions::DbSessionStore;
use backend::DashboardBackend;
use framing::FrameHeaders;

pub const SESSION_COOKIE: &str = "herald_session";
const STYLESHEET: &str = include_str!("../../../style/main.css");

/// The dashboard's routes, listed once per process. Listing them renders the app
/// with every resource load held back by a process-wide switch (Leptos'
/// `SuppressResourceLoad`): a page whose resource first ran while another
/// router was being built waited forever. Once listed, no page can start
/// before the list exists, and the switch is never thrown again.
static ROUTES: LazyLock<Vec<AxumRouteListing>> = LazyLock::new(|| generate_route_list(App));

pub fn router(services: Services) -> Router {
    let options = LeptosOptions::builder().output_name("herald").build();
    let backend: SharedBackend = Arc::new(DashboardBackend::new(services.clone()));
    let routes = ROUTES.clone();
    let frame = FrameHeaders::new(&services.settings);
    let (same_site, secure) = frame.cookie(services.settings.secure_cookies);
    let sessions = SessionManagerLayer::new(DbSessionStore::new(services.db.clone()))
        .with_name(SESSION_COOKIE)
        .with_http_only(true)
        .with_same_site(same_site)
        .with_secure(secure)
        .with_expiry(Expiry::OnInactivity(CookieDuration::hours(12)));
    let portal = Router::new().route("/portal/{token}", get(portal::open)).with_state(services.clone());
    Router::new()
        .leptos_routes_with_context(&options, routes, move || provide_context(backend.clone()), shell)
        .with_state(options)
        .merge(portal)
        .layer(axum::middleware::from_fn(csrf::same_origin_only))
        .layer(sessions)
        .layer(axum::middleware::from_fn_with_state(services.pipeline.health.clone(), while_database_away))
        .layer(axum::middleware::from_fn_with_state(frame, framing::add))
        .route("/style/main.css", get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLESHEET) }))
}

/// While the database is away, every page is this one: reading the session
/// alone would wait for the pool's deadline and then show the login page.
async fn while_database_away(
    State(health): State<Arc<DatabaseHealth>>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    if !health.is_down() {
        return next.run(request).await;
    }
    let page = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Database unavailable · Herald</title><link rel=\"stylesheet\" href=\"/style/main.css\"></head>\
         <body><main><h1>The database is unavailable</h1>\
         <p>Herald cannot use its database ({}). Nothing accepted is lost: deliveries wait and resume on their own \
         when it is back. Reload this page in a few seconds.</p></main></body></html>",
        html_escape::encode_text(health.name())
    );
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "2"), (header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page,
    )
        .into_response()
}

/// The dashboard's "not found" page, for paths no route serves.
pub fn not_found(
    services: Services,
) -> impl Fn(Request) -> BoxFuture<'static, Response> + Clone + Send + Sync + 'static {
    let frame = FrameHeaders::new(&services.settings);
    let backend: SharedBackend = Arc::new(DashboardBackend::new(services));
    let render = leptos_axum::render_app_async_with_context(move || provide_context(backend.clone()), shell);
    move |request: Request| {
        let (render, frame) = (render.clone(), frame.clone());
        Box::pin(async move {
            let mut response = render(request).await.into_response();
            frame.apply(&mut response);
            response
        })
    }
}
