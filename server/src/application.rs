//! Builds and runs Herald: the database and its migrations, then each layer's
//! handle from the one below (pipeline → services → API and dashboard), the
//! HTTP server, the lanes and SQLite's checkpoints. Tests start it on port 0
//! with `Application::build`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::response::IntoResponse;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower_http::trace::{DefaultOnFailure, TraceLayer};

use crate::api::problem::ApiError;
use crate::api::state::ApiState;
use crate::clock::{SharedClock, SystemClock};
use crate::config::Settings;
use crate::pipeline::{Lanes, Pipeline, gauges, heartbeat, replays, retention};
use crate::secrets::{Sealer, SecretKey};
use crate::service::subscriptions::seal_plaintext_secrets;
use crate::service::users::ensure_admin_user;
use crate::service::{ServiceError, Services};
use crate::store::owner::FileOwner;
use crate::store::wal_flush::{Flushed, WalFlush, WroteOnSafeMethod};
use crate::{api, store, telemetry, ui};

/// The `herald_meta` row naming the key the database's secrets are sealed with.
const KEY_FINGERPRINT: &str = "secret_key_fingerprint";

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("database: {0}")]
    Database(#[from] sea_orm::DbErr),
    #[error("cannot listen on {0}: {1}")]
    Listen(String, std::io::Error),
    #[error("{0}")]
    Service(#[from] crate::service::ServiceError),
    #[error("{0}")]
    Key(#[from] crate::secrets::KeyError),
    #[error("{0}")]
    Owner(#[from] crate::store::owner::OwnerError),
    #[error(
        "secret_key: this database's subscription secrets were sealed with another key; start Herald with that key \
         (secret_key / HERALD_SECRET_KEY, or the herald.key file in data_dir)"
    )]
    WrongKey,
}

pub struct Application {
    pub services: Services,
    listener: TcpListener,
    pub addr: SocketAddr,
    /// This process's hold on its SQLite file, for as long as it serves.
    _owner: Option<FileOwner>,
}

impl Application {
    pub async fn build(settings: Settings) -> Result<Application, StartError> {
        Self::build_with_clock(settings, Arc::new(SystemClock)).await
    }

    pub async fn build_with_clock(settings: Settings, clock: SharedClock) -> Result<Application, StartError> {
        let key = SecretKey::resolve(settings.secret_key.as_deref(), settings.key_dir().as_deref())?;
        let sealer = Sealer::new(&key);
        let owner = settings.sqlite_file().map(|file| store::owner::own(&file)).transpose()?;
        let db = store::connect_at_start(&settings.database_url, WalFlush::writer_synchronous(&settings)).await?;
        store::migrate(&db).await?;
        if owner.is_some() {
            // Every lease in the file is a dead process's: its messages are due now, not when the lease ends.
            let taken = store::messages::take_back_leases(&db, None, clock.now_ms()).await?;
            store::replays::release_leases(&db, None).await?;
            if taken > 0 {
                tracing::info!(taken, "took back the leases of a process that stopped without finishing them");
            }
        }
        if store::meta::get_or_insert(&db, KEY_FINGERPRINT, sealer.fingerprint()).await? != sealer.fingerprint() {
            return Err(StartError::WrongKey);
        }
        let listener =
            TcpListener::bind(&settings.listen).await.map_err(|e| StartError::Listen(settings.listen.clone(), e))?;
        let addr = listener.local_addr().map_err(|e| StartError::Listen(settings.listen.clone(), e))?;
        // Processes sharing a PostgreSQL database are numbered, so each can take back a silent one's leases.
        let process =
            if store::is_postgres(&db) { store::processes::register(&db, &host(), clock.now_ms()).await? } else { 0 };
        let pipeline = Pipeline::start(db, Arc::new(settings), clock, Arc::new(sealer), process);
        let services = Services::new(pipeline);
        ensure_admin_user(&services).await?;
        seal_plaintext_secrets(&services).await?;
        Ok(Application { services, listener, addr, _owner: owner })
    }

    /// The REST API and the dashboard, behind the request limits.
    pub fn router(services: Services) -> axum::Router {
        let limits = services.settings.limits.clone();
        // Every series of the hot path and every counter of rare events exists from the start.
        telemetry::hot();
        let api = api::router(ApiState::new(services.clone(), telemetry::metrics_handle()));
        let dashboard_not_found = ui::not_found(services.clone());
        let not_found = move |request: axum::extract::Request| {
            let dashboard_not_found = dashboard_not_found.clone();
            async move {
                if request.uri().path().starts_with("/api/") {
                    api::not_found()
                } else {
                    dashboard_not_found(request).await
                }
            }
        };
        let wal = services.pipeline.wal.clone();
        api.merge(ui::router(services))
            .fallback(not_found)
            .layer(axum::middleware::from_fn_with_state(wal, flush_before_answer))
            .layer(axum::middleware::from_fn_with_state(limits, api::limits::guard_request))
            // A failure is logged where it happens, and a database outage once (see `store::health`),
            // not again at every 5xx response.
            .layer(TraceLayer::new_for_http().on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG)))
    }

    /// Serves until `shutdown` turns true; the lanes run unless `with_lanes` is false.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>, with_lanes: bool) -> std::io::Result<()> {
        let spans = self.services.pipeline.spans.clone();
        let lanes = with_lanes.then(|| tokio::spawn(Lanes::new(self.services.pipeline.clone()).run(shutdown.clone())));
        let sweeper =
            with_lanes.then(|| tokio::spawn(retention::run(self.services.pipeline.clone(), shutdown.clone())));
        let replayer = with_lanes.then(|| tokio::spawn(replays::run(self.services.pipeline.clone(), shutdown.clone())));
        let url = &self.services.settings.database_url;
        let sync = self.services.settings.sqlite_synchronous;
        let gauges = with_lanes.then(|| {
            tokio::spawn(gauges::run(
                self.services.pipeline.clone(),
                self.services.pipeline.db.clone(),
                shutdown.clone(),
            ))
        });
        let checkpoints = store::checkpoint::applies_to(url)
            .then(|| tokio::spawn(store::checkpoint::run(url.clone(), shutdown.clone())));
        let heartbeat = if self.services.pipeline.process != 0 {
            // A connection of its own: the heartbeat never waits behind the lanes for the pool.
            let db = store::connect(url, sync).await.map_err(std::io::Error::other)?;
            Some(tokio::spawn(heartbeat::run(db, self.services.pipeline.clone(), shutdown.clone())))
        } else {
            None
        };
        let app = Self::router(self.services.clone());
        let mut stop = shutdown.clone();
        axum::serve(self.listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            })
            .await?;
        let _ = shutdown.wait_for(|stopped| *stopped).await;
        if let Some(lanes) = lanes {
            let _ = lanes.await;
        }
        if let Some(sweeper) = sweeper {
            let _ = sweeper.await;
        }
        if let Some(replayer) = replayer {
            let _ = replayer.await;
        }
        if let Some(gauges) = gauges {
            let _ = gauges.await;
        }
        if let Some(checkpoints) = checkpoints {
            let _ = checkpoints.await;
        }
        if let Some(heartbeat) = heartbeat {
            let _ = heartbeat.await;
        }
        if let Some(spans) = spans {
            // The last attempts' spans leave before the process does.
            let _ = tokio::task::spawn_blocking(move || spans.shutdown()).await;
        }
        Ok(())
    }
}

/// Sends the answer to a request that may have changed state only once
/// SQLite's log is on disk (see [`WalFlush`]): every method but the safe ones,
/// and an answer its handler marked [`WroteOnSafeMethod`]; not an answer marked
/// [`Flushed`], whose writes were flushed before it was made. Nothing to do when
/// each commit flushes itself, or on PostgreSQL.
async fn flush_before_answer(
    axum::extract::State(wal): axum::extract::State<Option<Arc<WalFlush>>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let Some(wal) = wal else { return next.run(request).await };
    let safe = request.method().is_safe();
    let response = next.run(request).await;
    if safe && response.extensions().get::<WroteOnSafeMethod>().is_none()
        || response.extensions().get::<Flushed>().is_some()
    {
        return response;
    }
    match wal.flush().await {
        Ok(()) => response,
        Err(failed) => ApiError::from(ServiceError::Db(failed)).into_response(),
    }
}

/// How a process names itself in the process table: its host and pid, for an operator to read.
fn host() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{} pid {}", name.trim(), std::process::id())
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Method, Request, StatusCode};
    use axum::routing::any;
    use tower::ServiceExt;

    use super::*;

    /// Every route answers 200, `/wrote` marked as a safe request that wrote, `/flushed` as
    /// already flushed; the layer decides what else happens.
    fn app(wal: WalFlush) -> axum::Router {
        let wrote = || async {
            let mut response = "done".into_response();
            response.extensions_mut().insert(WroteOnSafeMethod);
            response
        };
        let flushed = || async {
            let mut response = "done".into_response();
            response.extensions_mut().insert(Flushed);
            response
        };
        axum::Router::new()
            .route("/wrote", any(wrote))
            .route("/flushed", any(flushed))
            .route("/{*path}", any(|| async { "done" }))
            .layer(axum::middleware::from_fn_with_state(Some(Arc::new(wal)), flush_before_answer))
    }

    async fn status(app: &axum::Router, method: Method, path: &str) -> (StatusCode, String) {
        let request = Request::builder().method(method).uri(path).body(Body::empty()).unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 4096).await.unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn answers_that_may_change_state_wait_for_the_flush_and_reads_do_not() {
        // A log that cannot be flushed shows which answers wait for a flush: they fail.
        let failing = app(WalFlush::failing());
        for method in [Method::GET, Method::HEAD, Method::OPTIONS] {
            assert_eq!(status(&failing, method.clone(), "/api/v1/messages").await.0, StatusCode::OK, "{method}");
        }
        for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            let (code, body) = status(&failing, method.clone(), "/api/v1/subscriptions").await;
            assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE, "{method}");
            assert!(body.contains("try again"), "{body}");
        }
        // A GET whose handler says it wrote (opening a portal link) waits too; the path alone does not.
        assert_eq!(status(&failing, Method::GET, "/wrote").await.0, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(status(&failing, Method::GET, "/portal/hp_x").await.0, StatusCode::OK);
        // An answer whose handler waited for its own flush (a publish) is not flushed again.
        assert_eq!(status(&failing, Method::POST, "/flushed").await.0, StatusCode::OK);

        // A log that can be flushed lets the answer through.
        let (flushing, dir) = WalFlush::in_temp_dir("herald-flush-layer");
        let flushing = app(flushing);
        assert_eq!(status(&flushing, Method::POST, "/api/v1/subscriptions").await, (StatusCode::OK, "done".into()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
