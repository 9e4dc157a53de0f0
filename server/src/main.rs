//! The `herald` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use herald::{Application, Settings, store, telemetry};
use tokio::sync::watch;

// Herald allocates many small short-lived buffers per request; in the profile glibc's
// malloc and free took about a seventh of the process's time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "herald", version, about = "Event delivery to webhooks: at least once, signed, retried, replayable.")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// A TOML configuration file (environment variables override it).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API, the dashboard and the delivery workers (the default).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init_logging();
    let settings = match Settings::load(cli.config.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("herald: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command.unwrap_or(Command::Serve) {
        Command::Migrate => migrate(&settings).await,
        Command::Serve => serve(settings).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("herald: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn migrate(settings: &Settings) -> Result<(), Box<dyn std::error::Error>> {
    let db = store::connect(&settings.database_url).await?;
    store::migrate(&db).await?;
    tracing::info!("migrations applied");
    Ok(())
}

async fn serve(settings: Settings) -> Result<(), Box<dyn std::error::Error>> {
    let app = Application::build(settings).await?;
    tracing::info!(addr = %app.addr, "Herald is serving");
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down: no new claims; finishing in-flight deliveries");
        let _ = stop.send(true);
    });
    app.run(stopped, true).await?;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
