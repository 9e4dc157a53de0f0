//! Settings: defaults, then an optional TOML file, then environment variables,
//! layered once at start and validated before anything else runs.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use domain::breaker::BreakerConfig;
use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub listen: String,
    pub database_url: String,
    pub admin_token: Option<String>,
    pub admin_password: Option<String>,
    pub allow_private_targets: bool,
    /// Mark the dashboard's session cookie `Secure` (serve it over HTTPS, e.g. behind a TLS proxy).
    pub secure_cookies: bool,
    /// Base64 of the 32-byte key that seals subscription signing secrets in the database. When unset,
    /// Herald generates one on first start and keeps it in `data_dir/herald.key`.
    pub secret_key: Option<String>,
    /// Where a generated key is kept: by default the SQLite database's directory, or the working
    /// directory with PostgreSQL (set `secret_key` when several processes share one database).
    pub data_dir: Option<String>,
    /// When a SQLite commit reaches the disk (see [`SqliteSynchronous`]).
    pub sqlite_synchronous: SqliteSynchronous,
    /// An OpenTelemetry collector's OTLP/HTTP address (`http://127.0.0.1:4318`): spans of
    /// publishes and attempts are sent to its `/v1/traces`. Unset, nothing is exported.
    pub otlp_endpoint: Option<String>,
    /// Where people reach Herald (`https://herald.example.com`): portal links start with it. Unset,
    /// a link starts with the address its request was sent to.
    pub public_url: Option<String>,
    pub breaker: BreakerSettings,
    pub delivery: DeliverySettings,
    pub limits: LimitSettings,
    pub retention: RetentionSettings,
    pub portal: PortalSettings,
}

/// How the customer portal may be embedded.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PortalSettings {
    /// The origins (space-separated, as CSP's `frame-ancestors` takes them) whose pages may show
    /// the dashboard in an iframe. Empty: no page may (`frame-ancestors 'none'`, `X-Frame-Options: DENY`).
    pub frame_ancestors: String,
}

impl PortalSettings {
    /// The sources of `frame_ancestors`, each checked: `'self'`, or a scheme and a host (whose
    /// first label may be `*`) with an optional port. Anything else could break the header.
    pub fn origins(&self) -> Result<Vec<&str>, String> {
        let origins: Vec<&str> = self.frame_ancestors.split_ascii_whitespace().collect();
        for origin in &origins {
            if !is_frame_source(origin) {
                return Err(format!("{origin:?} is not an origin like https://app.example.com"));
            }
        }
        Ok(origins)
    }
}

fn is_frame_source(source: &str) -> bool {
    if source == "'self'" {
        return true;
    }
    let Some(rest) = source.strip_prefix("https://").or_else(|| source.strip_prefix("http://")) else {
        return false;
    };
    let (host, port) = rest.split_once(':').unwrap_or((rest, ""));
    let host = host.strip_prefix("*.").unwrap_or(host);
    let host_ok = !host.is_empty()
        && host
            .split('.')
            .all(|label| !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    let port_ok = port.is_empty() || (port.len() <= 5 && port.chars().all(|c| c.is_ascii_digit()));
    host_ok && port_ok && !rest.ends_with(':')
}

/// When a commit on SQLite reaches the disk. Herald runs SQLite in WAL mode.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SqliteSynchronous {
    /// Every commit flushes the write-ahead log before it returns: a publish is
    /// answered 202 only once its events are on disk, and so is every other change.
    #[default]
    Full,
    /// Commits are flushed with the next checkpoint (every 200 ms under load): an
    /// operating-system crash or a power loss may lose the last commits, events
    /// already answered 202 among them. A crash of Herald alone loses nothing.
    Normal,
}

/// The circuit breaker's thresholds (the `breaker.*` keys of the README's configuration table).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BreakerSettings {
    pub failure_rate: f64,
    pub min_attempts: u64,
    pub window_secs: u64,
    pub disable_consecutive: u64,
    pub lock_consecutive: u64,
    pub lock_silence_secs: u64,
    pub lock_consecutive_any: u64,
    pub probe_secs: u64,
}

/// How much the workers do at once.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DeliverySettings {
    /// Concurrent first attempts.
    pub fresh_concurrency: usize,
    /// Concurrent retries, a separate budget so a retry backlog never starves fresh messages.
    pub retry_concurrency: usize,
    /// Concurrent attempts to one endpoint, so one slow receiver cannot take every worker.
    pub endpoint_concurrency: usize,
    /// Seconds a claimed message stays leased beyond its timeout before another worker may reclaim it.
    pub lease_grace_secs: u64,
}

/// How long history is kept, and how often what has passed its time is removed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RetentionSettings {
    /// Seconds an event is kept after it was published (its `(source, id)` is unique meanwhile).
    pub events_secs: u64,
    /// Seconds a message and its attempts are kept after the message ended (delivered or dead).
    pub messages_secs: u64,
    /// Seconds between two sweeps.
    pub sweep_secs: u64,
}

impl Default for RetentionSettings {
    fn default() -> Self {
        RetentionSettings { events_secs: 30 * 86_400, messages_secs: 30 * 86_400, sweep_secs: 60 }
    }
}

/// What one request may carry, and how fast one API key may publish.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitSettings {
    /// The largest request body, in bytes (413 beyond).
    pub max_body_bytes: usize,
    /// The deepest nesting of arrays and objects in a JSON body (400 beyond).
    pub max_json_depth: usize,
    /// The request line's target plus every header name and value, in bytes (431 beyond).
    pub max_header_bytes: usize,
    /// Publishes per second per API key (a token bucket); 0 turns the limit off.
    pub publish_per_sec: f64,
    /// How many publishes a key may send at once before the rate applies.
    pub publish_burst: u32,
}

impl Default for LimitSettings {
    fn default() -> Self {
        LimitSettings {
            max_body_bytes: 4 * 1024 * 1024,
            max_json_depth: 64,
            max_header_bytes: 32 * 1024,
            publish_per_sec: 0.0,
            publish_burst: 100,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            listen: "127.0.0.1:8080".into(),
            database_url: "sqlite://herald.db?mode=rwc".into(),
            admin_token: None,
            admin_password: None,
            allow_private_targets: false,
            secure_cookies: false,
            secret_key: None,
            data_dir: None,
            sqlite_synchronous: SqliteSynchronous::default(),
            otlp_endpoint: None,
            public_url: None,
            breaker: BreakerSettings::default(),
            delivery: DeliverySettings::default(),
            limits: LimitSettings::default(),
            retention: RetentionSettings::default(),
            portal: PortalSettings::default(),
        }
    }
}

impl Default for BreakerSettings {
    fn default() -> Self {
        BreakerSettings {
            failure_rate: 0.70,
            min_attempts: 100,
            window_secs: 86_400,
            disable_consecutive: 2_000,
            lock_consecutive: 2_000,
            lock_silence_secs: 259_200,
            lock_consecutive_any: 50_000,
            probe_secs: 600,
        }
    }
}

impl Default for DeliverySettings {
    fn default() -> Self {
        DeliverySettings {
            fresh_concurrency: 256,
            retry_concurrency: 64,
            endpoint_concurrency: 32,
            lease_grace_secs: 30,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration: {0}")]
    Load(#[from] Box<figment::Error>),
    #[error("configuration: {field}: {message}")]
    Invalid { field: &'static str, message: String },
}

impl BreakerSettings {
    /// The breaker's rules in the domain's units.
    pub fn config(&self) -> BreakerConfig {
        BreakerConfig {
            failure_rate: self.failure_rate,
            min_attempts: self.min_attempts,
            window_ms: self.window_secs as i64 * 1000,
            disable_consecutive: self.disable_consecutive,
            lock_consecutive: self.lock_consecutive,
            lock_silence_ms: self.lock_silence_secs as i64 * 1000,
            lock_consecutive_any: self.lock_consecutive_any,
            probe_ms: self.probe_secs as i64 * 1000,
        }
    }
}

impl Settings {
    /// Layers defaults, the TOML file (when given) and the environment.
    pub fn load(config_file: Option<&Path>) -> Result<Settings, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Settings::default()));
        if let Some(path) = config_file {
            if !path.exists() {
                return Err(ConfigError::Invalid {
                    field: "--config",
                    message: format!("file {} does not exist", path.display()),
                });
            }
            figment = figment.merge(Toml::file_exact(path));
        }
        Self::from_figment(figment.merge(environment())).and_then(Settings::validated)
    }

    /// The file of a `sqlite:` database; `None` for PostgreSQL or a database in memory.
    pub fn sqlite_file(&self) -> Option<PathBuf> {
        let url = &self.database_url;
        let rest = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:"))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        if path.is_empty() || path == ":memory:" || query.split('&').any(|p| p == "mode=memory") {
            return None;
        }
        Some(PathBuf::from(path))
    }

    /// Where a generated secret key is kept: `data_dir`, else the SQLite file's
    /// directory, else the working directory. None for an in-memory database.
    pub fn key_dir(&self) -> Option<PathBuf> {
        if let Some(dir) = &self.data_dir {
            return Some(PathBuf::from(dir));
        }
        if !self.database_url.starts_with("sqlite:") {
            return Some(PathBuf::from("."));
        }
        let file = self.sqlite_file()?;
        let parent = file.parent().filter(|p| !p.as_os_str().is_empty());
        Some(parent.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from(".")))
    }

    fn from_figment(figment: Figment) -> Result<Settings, ConfigError> {
        figment.extract().map_err(|e| ConfigError::Load(Box::new(e)))
    }

    /// Checks every value a user can get wrong, naming the key.
    pub fn validated(self) -> Result<Settings, ConfigError> {
        let invalid = |field, message: &str| Err(ConfigError::Invalid { field, message: message.into() });
        if self.listen.parse::<SocketAddr>().is_err() {
            return invalid("listen", "must be an address like 127.0.0.1:8080");
        }
        if !(self.database_url.starts_with("sqlite:")
            || self.database_url.starts_with("postgres://")
            || self.database_url.starts_with("postgresql://"))
        {
            return invalid("database_url", "must start with sqlite: or postgres://");
        }
        if self.admin_token.as_ref().is_some_and(|t| t.len() < 32) {
            return invalid("admin_token", "must be at least 32 characters");
        }
        if self.admin_password.as_ref().is_some_and(|p| p.len() < 8) {
            return invalid("admin_password", "must be at least 8 characters");
        }
        if let Some(endpoint) = &self.otlp_endpoint {
            let parsed =
                url::Url::parse(endpoint).ok().filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host());
            if parsed.is_none() {
                return invalid("otlp_endpoint", "must be an http:// or https:// URL, like http://127.0.0.1:4318");
            }
        }
        if let Some(public) = &self.public_url {
            let parsed = url::Url::parse(public).ok().filter(|u| {
                matches!(u.scheme(), "http" | "https") && u.has_host() && u.query().is_none() && u.fragment().is_none()
            });
            if parsed.is_none() {
                return invalid("public_url", "must be an http:// or https:// URL, like https://herald.example.com");
            }
        }
        if let Err(message) = self.portal.origins() {
            return invalid("portal.frame_ancestors", &message);
        }
        let b = &self.breaker;
        if !(b.failure_rate > 0.0 && b.failure_rate <= 1.0) {
            return invalid("breaker.failure_rate", "must be above 0 and at most 1");
        }
        for (field, value) in [
            ("breaker.window_secs", b.window_secs),
            ("breaker.disable_consecutive", b.disable_consecutive),
            ("breaker.lock_consecutive", b.lock_consecutive),
            ("breaker.lock_consecutive_any", b.lock_consecutive_any),
            ("breaker.probe_secs", b.probe_secs),
        ] {
            if value == 0 {
                return invalid(field, "must be at least 1");
            }
        }
        let d = &self.delivery;
        if d.fresh_concurrency == 0 || d.retry_concurrency == 0 || d.endpoint_concurrency == 0 {
            return invalid("delivery", "concurrency must be at least 1");
        }
        if let Some(key) = &self.secret_key
            && let Err(message) = crate::secrets::SecretKey::from_base64(key)
        {
            return invalid("secret_key", &message);
        }
        let l = &self.limits;
        if l.max_body_bytes < 1024 {
            return invalid("limits.max_body_bytes", "must be at least 1024");
        }
        if l.max_json_depth < 4 {
            return invalid("limits.max_json_depth", "must be at least 4");
        }
        if l.max_header_bytes < 1024 {
            return invalid("limits.max_header_bytes", "must be at least 1024");
        }
        if !(l.publish_per_sec >= 0.0 && l.publish_per_sec.is_finite()) {
            return invalid("limits.publish_per_sec", "must be 0 (off) or a positive number");
        }
        if l.publish_burst == 0 {
            return invalid("limits.publish_burst", "must be at least 1");
        }
        let r = &self.retention;
        for (field, value) in [
            ("retention.events_secs", r.events_secs),
            ("retention.messages_secs", r.messages_secs),
            ("retention.sweep_secs", r.sweep_secs),
        ] {
            if value == 0 {
                return invalid(field, "must be at least 1");
            }
        }
        Ok(self)
    }
}

/// `HERALD_*` variables (with `HERALD_BREAKER_*`, `HERALD_DELIVERY_*`, `HERALD_LIMITS_*`, `HERALD_RETENTION_*` and `HERALD_PORTAL_*` mapped
/// into their sections) and the conventional `DATABASE_URL`. Other `HERALD_*`
/// variables belong to other tools and are left alone.
fn environment() -> Figment {
    const TOP_LEVEL: &[&str] = &[
        "listen",
        "database_url",
        "admin_token",
        "admin_password",
        "allow_private_targets",
        "secure_cookies",
        "secret_key",
        "data_dir",
        "sqlite_synchronous",
        "otlp_endpoint",
        "public_url",
    ];
    let herald = Env::prefixed("HERALD_").filter_map(|key| {
        let key = key.as_str().to_ascii_lowercase();
        for section in ["breaker", "delivery", "limits", "retention", "portal"] {
            if let Some(rest) = key.strip_prefix(&format!("{section}_")) {
                return Some(format!("{section}.{rest}").into());
            }
        }
        TOP_LEVEL.contains(&key.as_str()).then(|| key.into())
    });
    Figment::new().merge(Env::raw().only(&["DATABASE_URL"]).map(|_| "database_url".into())).merge(herald)
}

#[cfg(test)]
// figment's `Jail` closures return its own error type, large as it is.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;

    #[test]
    fn environment_overrides_toml_which_overrides_defaults() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "herald.toml",
                "listen = \"127.0.0.1:9000\"\nallow_private_targets = true\n[breaker]\nprobe_secs = 5\nfailure_rate = 0.5\n",
            )?;
            jail.set_env("HERALD_BREAKER_PROBE_SECS", "2");
            jail.set_env("HERALD_ADMIN_TOKEN", "t".repeat(32));
            jail.set_env("DATABASE_URL", "postgres://db/herald");
            jail.set_env("HERALD_BIN", "/usr/bin/true");
            let s = Settings::load(Some(Path::new("herald.toml"))).expect("valid settings");
            assert_eq!(s.listen, "127.0.0.1:9000");
            assert!(s.allow_private_targets);
            assert_eq!(s.breaker.probe_secs, 2);
            assert_eq!(s.breaker.failure_rate, 0.5);
            assert_eq!(s.breaker.min_attempts, 100);
            assert_eq!(s.database_url, "postgres://db/herald");
            assert_eq!(s.admin_token.as_deref(), Some("t".repeat(32).as_str()));
            Ok(())
        });
    }

    #[test]
    fn every_breaker_key_reads_from_its_environment_variable() {
        figment::Jail::expect_with(|jail| {
            for (var, value) in [
                ("HERALD_BREAKER_FAILURE_RATE", "0.9"),
                ("HERALD_BREAKER_MIN_ATTEMPTS", "7"),
                ("HERALD_BREAKER_WINDOW_SECS", "60"),
                ("HERALD_BREAKER_DISABLE_CONSECUTIVE", "5"),
                ("HERALD_BREAKER_LOCK_CONSECUTIVE", "9"),
                ("HERALD_BREAKER_LOCK_SILENCE_SECS", "0"),
                ("HERALD_BREAKER_LOCK_CONSECUTIVE_ANY", "11"),
                ("HERALD_BREAKER_PROBE_SECS", "2"),
                ("HERALD_LISTEN", "127.0.0.1:0"),
                ("HERALD_ADMIN_PASSWORD", "correct horse"),
                ("HERALD_ALLOW_PRIVATE_TARGETS", "true"),
            ] {
                jail.set_env(var, value);
            }
            let s = Settings::load(None).expect("valid settings");
            let b = &s.breaker;
            assert_eq!((b.failure_rate, b.min_attempts, b.window_secs, b.disable_consecutive), (0.9, 7, 60, 5));
            assert_eq!((b.lock_consecutive, b.lock_silence_secs, b.lock_consecutive_any, b.probe_secs), (9, 0, 11, 2));
            assert_eq!(s.listen, "127.0.0.1:0");
            assert_eq!(s.admin_password.as_deref(), Some("correct horse"));
            assert!(s.allow_private_targets);
            Ok(())
        });
    }

    #[test]
    fn the_portal_reads_its_frame_ancestors_and_refuses_what_is_not_an_origin() {
        figment::Jail::expect_with(|jail| {
            assert_eq!(Settings::load(None).expect("defaults").portal.origins(), Ok(vec![]));
            jail.set_env("HERALD_PORTAL_FRAME_ANCESTORS", "https://app.example.com  http://127.0.0.1:3000 'self'");
            jail.set_env("HERALD_PUBLIC_URL", "https://herald.example.com");
            let s = Settings::load(None).expect("valid settings");
            let origins = s.portal.origins().unwrap();
            assert_eq!(origins, ["https://app.example.com", "http://127.0.0.1:3000", "'self'"]);
            assert_eq!(s.public_url.as_deref(), Some("https://herald.example.com"));
            for bad in
                ["*", "https://a.example.com; script-src *", "app.example.com", "'none'", "https://a.example.com:"]
            {
                jail.set_env("HERALD_PORTAL_FRAME_ANCESTORS", bad);
                let e = Settings::load(None).unwrap_err().to_string();
                assert!(e.contains("portal.frame_ancestors"), "{bad}: {e}");
            }
            jail.set_env("HERALD_PORTAL_FRAME_ANCESTORS", "");
            jail.set_env("HERALD_PUBLIC_URL", "herald.example.com");
            assert!(Settings::load(None).unwrap_err().to_string().contains("public_url"));
            Ok(())
        });
    }

    #[test]
    fn sqlite_commits_are_flushed_unless_the_operator_says_normal() {
        figment::Jail::expect_with(|jail| {
            assert_eq!(Settings::load(None).expect("defaults").sqlite_synchronous, SqliteSynchronous::Full);
            jail.create_file("herald.toml", "sqlite_synchronous = \"normal\"\n")?;
            let s = Settings::load(Some(Path::new("herald.toml"))).expect("valid settings");
            assert_eq!(s.sqlite_synchronous, SqliteSynchronous::Normal);
            jail.set_env("HERALD_SQLITE_SYNCHRONOUS", "full");
            let s = Settings::load(Some(Path::new("herald.toml"))).expect("valid settings");
            assert_eq!(s.sqlite_synchronous, SqliteSynchronous::Full);
            Ok(())
        });
    }

    #[test]
    fn bad_values_fail_naming_the_key() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("HERALD_ADMIN_TOKEN", "short");
            let err = Settings::load(None).unwrap_err().to_string();
            assert!(err.contains("admin_token"), "{err}");
            jail.clear_env();
            jail.set_env("HERALD_BREAKER_FAILURE_RATE", "1.5");
            let err = Settings::load(None).unwrap_err().to_string();
            assert!(err.contains("breaker.failure_rate"), "{err}");
            jail.clear_env();
            jail.set_env("HERALD_BREAKER_MIN_ATTEMPTS", "lots");
            let err = Settings::load(None).unwrap_err().to_string();
            assert!(err.to_lowercase().contains("breaker.min_attempts"), "{err}");
            jail.clear_env();
            jail.set_env("HERALD_SQLITE_SYNCHRONOUS", "off");
            let err = Settings::load(None).unwrap_err().to_string();
            assert!(err.to_lowercase().contains("sqlite_synchronous"), "{err}");
            jail.clear_env();
            jail.set_env("HERALD_OTLP_ENDPOINT", "127.0.0.1:4318");
            let err = Settings::load(None).unwrap_err().to_string();
            assert!(err.contains("otlp_endpoint"), "{err}");
            jail.set_env("HERALD_OTLP_ENDPOINT", "http://127.0.0.1:4318");
            assert_eq!(Settings::load(None).unwrap().otlp_endpoint.as_deref(), Some("http://127.0.0.1:4318"));
            Ok(())
        });
        assert!(Settings::load(Some(Path::new("/nonexistent/herald.toml"))).is_err());
    }

    #[test]
    fn the_data_directory_follows_the_sqlite_file() {
        let with = |url: &str, dir: Option<&str>| {
            let s = Settings { database_url: url.into(), data_dir: dir.map(Into::into), ..Settings::default() };
            s.key_dir()
        };
        assert_eq!(with("sqlite://herald.db?mode=rwc", None), Some(PathBuf::from(".")));
        assert_eq!(with("sqlite:///var/lib/herald/h.db?mode=rwc", None), Some(PathBuf::from("/var/lib/herald")));
        assert_eq!(with("sqlite::memory:", None), None);
        assert_eq!(with("sqlite://h.db?mode=memory&cache=shared", None), None);
        assert_eq!(with("postgres://db/herald", None), Some(PathBuf::from(".")));
        assert_eq!(with("postgres://db/herald", Some("/srv/h")), Some(PathBuf::from("/srv/h")));
        let file = |url: &str| Settings { database_url: url.into(), ..Settings::default() }.sqlite_file();
        assert_eq!(file("sqlite://herald.db?mode=rwc"), Some(PathBuf::from("herald.db")));
        assert_eq!(file("sqlite:///var/lib/h.db"), Some(PathBuf::from("/var/lib/h.db")));
        assert_eq!(file("sqlite::memory:"), None);
        assert_eq!(file("postgres://db/herald"), None);
    }

    /// The configuration the Debian package installs: it loads, sets every key to its default
    /// but where the data lives, and names every key (a commented line for an unset one).
    #[test]
    fn the_packaged_configuration_names_every_key_at_its_default() {
        const PACKAGED: &str = include_str!("../../deploy/debian/herald.toml");
        let loaded = Settings::from_figment(
            Figment::from(Serialized::defaults(Settings::default())).merge(Toml::string(PACKAGED)),
        )
        .and_then(Settings::validated)
        .expect("the packaged configuration loads");
        let expected = Settings {
            database_url: "sqlite:///var/lib/herald/herald.db?mode=rwc".into(),
            data_dir: Some("/var/lib/herald".into()),
            ..Settings::default()
        };
        assert_eq!(loaded, expected);

        let mut named = std::collections::BTreeSet::new();
        let mut section = String::new();
        for line in PACKAGED.lines().map(|l| l.trim_start_matches("# ")) {
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = format!("{name}.");
            } else if let Some((key, _)) = line.split_once(" = ") {
                named.insert(format!("{section}{key}"));
            }
        }
        let mut keys = std::collections::BTreeSet::new();
        let all = serde_json::to_value(Settings::default()).unwrap();
        for (key, value) in all.as_object().unwrap() {
            match value.as_object() {
                Some(inner) => keys.extend(inner.keys().map(|k| format!("{key}.{k}"))),
                None => {
                    keys.insert(key.clone());
                }
            }
        }
        assert_eq!(named, keys);
    }
}
