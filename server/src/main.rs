//! The `herald` command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use herald::{Application, Settings, secrets, store, telemetry};
use tokio::sync::watch;

// Herald allocates many small short-lived buffers per request, and glibc's malloc and free
// showed up large in its profile. mimalloc's v2 line, not v3: with the same work v3 held more
// memory and delivered no faster (docs/performance.md, "Levers that mattered").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in the enum of the mimalloc release that libmimalloc-sys builds
/// (c_src/mimalloc/v2/include/mimalloc.h, the same in v3); the crate's bindings predate the option's name.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed pages go back to the system after 2 ms instead of 10 ms (mimalloc 2's default). Any delay
/// keeps freed buffers resident, and a longer one more of them; without one, though, every buffer
/// that empties a page hands it back and the next batch faults it in again, which cost Herald a
/// large share of its CPU under load (the figures are in docs/performance.md). A machine with
/// memory to spare may set mimalloc's own `MIMALLOC_PURGE_DELAY` (milliseconds), which is then
/// left alone.
const PURGE_DELAY_MS: std::ffi::c_long = 2;

fn return_freed_memory_soon() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: sets an allocator option; mimalloc reads options atomically and allows this at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) }
}

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
    /// Write a consistent copy of the SQLite database to PATH while Herald serves it.
    Backup {
        /// Where the copy goes; never an existing file.
        path: PathBuf,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    return_freed_memory_soon();
    // SAFETY: nothing has used SQLite yet; see the module's comment.
    unsafe { store::sqlite_memory::configure() };
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
        Command::Backup { path } => backup(&settings, &path).await,
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
    let db = store::connect_at_start(&settings.database_url, settings.sqlite_synchronous).await?;
    store::migrate(&db).await?;
    tracing::info!("migrations applied");
    Ok(())
}

async fn backup(settings: &Settings, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let bytes = store::backup::copy_sqlite(settings, path).await?;
    let key = match (&settings.secret_key, settings.key_dir()) {
        (Some(_), _) => "the secret_key you configured (HERALD_SECRET_KEY)".to_string(),
        (None, Some(dir)) => dir.join(secrets::KEY_FILE).display().to_string(),
        (None, None) => "the secret key".to_string(),
    };
    println!(
        "herald: wrote a consistent copy of the database to {} ({bytes} bytes).\n\
         Keep {key} with it: without that key the subscriptions' signing secrets cannot be opened.\n\
         To restore: stop Herald, remove the database file's -wal and -shm files, put the copy in place of the \
         database file and the key in place, and start Herald.",
        path.display()
    );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_set_is_the_purge_delay() {
        // SAFETY: reads an allocator option.
        let get = || unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        match std::env::var("MIMALLOC_PURGE_DELAY").ok().and_then(|v| v.parse::<i64>().ok()) {
            None => {
                assert_eq!(get(), 10, "mimalloc 2's purge delay defaults to 10 ms; another value means the enum moved");
                return_freed_memory_soon();
                assert_eq!(get(), PURGE_DELAY_MS);
            }
            Some(chosen) => {
                return_freed_memory_soon();
                assert_eq!(get(), chosen, "the delay set in the environment is kept");
            }
        }
    }
}
