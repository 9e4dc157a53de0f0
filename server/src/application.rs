//! Builds and runs Herald: database, migrations, HTTP server and workers.
//! Tests start it on port 0 with `Application::build`.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tower_http::trace::TraceLayer;

use crate::api::rate_limit::PublishLimiter;
use crate::clock::{SharedClock, SystemClock};
use crate::config::Settings;
use crate::secrets::{Sealer, SecretKey};
use crate::service::customers::ensure_admin_user;
use crate::service::intake::{Intake, IntakeParts};
use crate::service::subscriptions::seal_plaintext_secrets;
use crate::state::{AppState, Shared};
use crate::worker::handoff::Handoff;
use crate::worker::{Wakeup, Worker, lease_ms};
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
    #[error(
        "secret_key: this database's subscription secrets were sealed with another key; start Herald with that key \
         (secret_key / HERALD_SECRET_KEY, or the herald.key file in data_dir)"
    )]
    WrongKey,
}

pub struct Application {
    pub state: AppState,
    listener: TcpListener,
    pub addr: SocketAddr,
}

impl Application {
    pub async fn build(settings: Settings) -> Result<Application, StartError> {
        Self::build_with_clock(settings, Arc::new(SystemClock)).await
    }

    pub async fn build_with_clock(settings: Settings, clock: SharedClock) -> Result<Application, StartError> {
        let sealer = Sealer::new(&SecretKey::resolve(&settings)?);
        let db = store::connect(&settings.database_url).await?;
        store::migrate(&db).await?;
        if store::meta::get_or_insert(&db, KEY_FINGERPRINT, sealer.fingerprint()).await? != sealer.fingerprint() {
            return Err(StartError::WrongKey);
        }
        let listener =
            TcpListener::bind(&settings.listen).await.map_err(|e| StartError::Listen(settings.listen.clone(), e))?;
        let addr = listener.local_addr().map_err(|e| StartError::Listen(settings.listen.clone(), e))?;
        let publish_limiter = PublishLimiter::new(&settings.limits);
        let wake = Arc::new(Wakeup::default());
        let handoff = Arc::new(Handoff::default());
        let intake = Intake::spawn(IntakeParts {
            db: db.clone(),
            clock: clock.clone(),
            wake: wake.clone(),
            handoff: handoff.clone(),
            lease_ms: lease_ms(&settings.delivery),
        });
        let state = AppState::new(Shared {
            db,
            settings: Arc::new(settings),
            clock,
            wake,
            metrics: telemetry::metrics_handle(),
            sealer: Arc::new(sealer),
            publish_limiter: Arc::new(publish_limiter),
            keys: Arc::default(),
            intake,
            handoff,
        });
        ensure_admin_user(&state).await?;
        seal_plaintext_secrets(&state).await?;
        Ok(Application { state, listener, addr })
    }

    pub fn router(state: AppState) -> axum::Router {
        let limits = state.settings.limits.clone();
        let api = api::router(limits.max_body_bytes).with_state(state.clone());
        api.merge(ui::router(state.clone()))
            .fallback(ui::not_found(state))
            .layer(axum::middleware::from_fn_with_state(limits, api::limits::guard_request))
            .layer(TraceLayer::new_for_http())
    }

    /// Serves until `shutdown` turns true; the workers run unless `with_workers` is false.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>, with_workers: bool) -> std::io::Result<()> {
        let worker = with_workers.then(|| tokio::spawn(Worker::new(self.state.clone()).run(shutdown.clone())));
        let url = &self.state.settings.database_url;
        let checkpoints = store::checkpoint::applies_to(url)
            .then(|| tokio::spawn(store::checkpoint::run(url.clone(), shutdown.clone())));
        let app = Self::router(self.state.clone());
        let mut stop = shutdown.clone();
        axum::serve(self.listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            })
            .await?;
        let _ = shutdown.wait_for(|stopped| *stopped).await;
        if let Some(worker) = worker {
            let _ = worker.await;
        }
        if let Some(checkpoints) = checkpoints {
            let _ = checkpoints.await;
        }
        Ok(())
    }
}
