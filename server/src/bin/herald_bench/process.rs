//! The herald child process: start, wait until healthy, stop; and its CPU time
//! and memory from /proc.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rand::Rng;
use rand::distr::Alphanumeric;
use tokio::process::{Child, Command};

use crate::Result;

pub struct Herald {
    child: Child,
    pub pid: u32,
    pub base: String,
    pub admin_token: String,
    pub log: PathBuf,
}

/// A port that was free a moment ago (herald binds it right after).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Herald {
    /// Runs `herald serve` with its output in `log`, and waits for `/healthz`.
    pub async fn start(bin: &Path, database_url: &str, env: &[(&str, String)], log: PathBuf) -> Result<Herald> {
        let port = free_port()?;
        let admin_token: String = rand::rng().sample_iter(&Alphanumeric).take(40).map(char::from).collect();
        let out = std::fs::File::create(&log)?;
        let child = Command::new(bin)
            .arg("serve")
            .env("HERALD_LISTEN", format!("127.0.0.1:{port}"))
            .env("DATABASE_URL", database_url)
            .env("HERALD_ADMIN_TOKEN", &admin_token)
            .env("HERALD_ALLOW_PRIVATE_TARGETS", "true")
            // The generated key that seals secrets goes beside the log, not into the working directory.
            .env("HERALD_DATA_DIR", log.parent().unwrap_or(Path::new(".")))
            .env("RUST_LOG", "warn")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().ok_or("herald exited at once")?;
        let mut herald = Herald { child, pid, base: format!("http://127.0.0.1:{port}"), admin_token, log };
        herald.wait_healthy(Duration::from_secs(60)).await?;
        Ok(herald)
    }

    async fn wait_healthy(&mut self, within: Duration) -> Result<()> {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(format!("herald exited ({status}); see {}", self.log.display()).into());
            }
            let ok = client.get(format!("{}/healthz", self.base)).send().await.is_ok_and(|r| r.status().is_success());
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("herald not healthy after {within:?}; see {}", self.log.display()).into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited within the deadline.
    pub async fn stop(mut self) {
        self.terminate().await;
    }

    /// As [`Herald::stop`], keeping the handle (to be replaced by a new process).
    pub async fn terminate(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.pid.to_string()]).status().await;
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await.is_err() {
            eprintln!("herald ignored SIGTERM for 10 s; killing it");
            let _ = self.child.kill().await;
        }
    }

    /// User + system CPU seconds so far.
    pub fn cpu_secs(&self) -> f64 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) else { return 0.0 };
        // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = [11, 12].iter().filter_map(|&i| fields.get(i)?.parse::<u64>().ok()).sum();
        ticks as f64 / clock_ticks() as f64
    }

    /// Peak resident memory (VmHWM) in MB.
    pub fn peak_rss_mb(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        kb / 1024.0
    }

    /// Restarts the peak-RSS measurement, so a phase reports its own peak.
    pub fn reset_peak_rss(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid), "5").is_ok()
    }
}

/// Clock ticks per second for /proc times (asked once; 100 on every common Linux).
fn clock_ticks() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|&t| t > 0)
            .unwrap_or(100)
    })
}
