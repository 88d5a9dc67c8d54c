//! Configuration from the environment, checked at start-up.

use std::time::Duration;

use queue_core::encryption::{Keyring, KeyringError};

/// Which parts of the service this process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// HTTP only: enqueues, never processes.
    Web,
    /// Workers only: processes, serves no HTTP.
    Worker,
    /// Both (the default).
    All,
}

/// Everything the service reads from the environment.
#[derive(Debug, Clone)]
pub struct Config {
    /// `PORT` (default 3000).
    pub port: u16,
    /// `REDIS_URL` (default `redis://127.0.0.1:6379`; `redis+sentinel://...` for a master
    /// kept by Redis Sentinel).
    pub redis_url: String,
    /// `DATABASE_URL` (default `sqlite://welcome.db`, created if missing).
    pub database_url: String,
    /// `QUEUE_PREFIX` (default `bull`).
    pub queue_prefix: String,
    /// `ROLE`: `web`, `worker` or `all` (default).
    pub role: Role,
    /// `MAIL_FAIL_RATE`: the share of sends that fail, 0.0 to 1.0 (default 0).
    pub mail_fail_rate: f64,
    /// `TZ`: the time zone of the daily birthday scan (default UTC).
    pub tz: chrono_tz::Tz,
    /// `WELCOME_BACKOFF_MS`: first retry delay of a welcome email (default 3000).
    pub welcome_backoff: Duration,
    /// `ADMIN_TOKEN`: the bearer token of operator actions (the manual birthday scan,
    /// job details, anyone's coupons). Unset, they are disabled. At least 16
    /// characters.
    pub admin_token: Option<String>,
    /// How exports run (`EXPORT_TIMEOUT_MS`, default 5 minutes; `EXPORT_BATCH_SIZE`,
    /// default 500; `EXPORT_BATCH_PAUSE_MS`, default 20).
    pub export: crate::jobs::exports::ExportSettings,
    /// `REDIS_CLUSTER_NODES`: seed URLs of a Redis Cluster, comma-separated; when set,
    /// `REDIS_URL` is not used, and `QUEUE_PREFIX` defaults to `{bull}` (a hash tag:
    /// BullMQ needs every key of a queue in one slot).
    pub redis_cluster_nodes: Option<Vec<String>>,
    /// Who gets the monthly report's mail (`REPORT_EMAIL`, default `reports@localhost`).
    pub report_email: String,
    /// The keys the mail and coupon queues are sealed with: `QUEUE_KEYS` (the keyring's
    /// text, see `queue_core::encryption::Keyring`), else the file `QUEUE_KEYS_FILE`
    /// (default `welcome.keys`, made with a new key when missing).
    pub keys: Keys,
}

/// Where the keyring comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum Keys {
    /// The keyring's text, from `QUEUE_KEYS`.
    Text(String),
    /// A file holding it, made with a new key when missing.
    File(std::path::PathBuf),
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // The text is the keys themselves.
            Keys::Text(_) => f.write_str("Text(..)"),
            Keys::File(path) => f.debug_tuple("File").field(path).finish(),
        }
    }
}

impl Keys {
    /// The keyring. A missing file is made with one new key (and a warning: the file is
    /// to be kept with the database and backed up as a secret), so that the example
    /// runs on a fresh machine with no set-up.
    pub fn keyring(&self) -> Result<Keyring, KeyringError> {
        match self {
            Keys::Text(text) => Keyring::parse(text),
            Keys::File(path) if path.exists() => Keyring::from_file(path),
            Keys::File(path) => {
                let entry = Keyring::new_key_entry("welcome-1")?;
                write_secret(
                    path,
                    &format!("# made by welcome-app; the first key seals\n{entry}\n"),
                )
                .map_err(|source| KeyringError::File {
                    path: path.display().to_string(),
                    source,
                })?;
                tracing::warn!(path = %path.display(), "no QUEUE_KEYS: made a new keyring file; keep it (jobs sealed with it open only with it) and keep it out of version control");
                Keyring::from_file(path)
            }
        }
    }
}

/// Writes `text` to a new file only its owner may read (never over an existing one: a
/// second process starting at the same moment keeps the first one's key).
fn write_secret(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(mut file) => file.write_all(text.as_bytes()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// The shortest `ADMIN_TOKEN` accepted.
pub const MIN_ADMIN_TOKEN_LEN: usize = 16;

/// How many different characters an `ADMIN_TOKEN` has at least: a letter repeated
/// sixteen times, or a word twice, is long and guessed at once.
pub const MIN_ADMIN_TOKEN_DISTINCT: usize = 8;

/// Whether `token` is long and varied enough to stand for the operator.
fn strong_enough(token: &str) -> bool {
    let distinct: std::collections::BTreeSet<char> = token.chars().collect();
    token.len() >= MIN_ADMIN_TOKEN_LEN && distinct.len() >= MIN_ADMIN_TOKEN_DISTINCT
}

/// A variable that is set but not usable.
#[derive(Debug, thiserror::Error)]
#[error("{name}={value:?} is not valid: {expected}")]
pub struct ConfigError {
    name: &'static str,
    value: String,
    expected: &'static str,
}

impl Config {
    /// Reads the environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads variables through `lookup` (tests pass their own).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        fn parsed<T: std::str::FromStr>(
            lookup: &impl Fn(&str) -> Option<String>,
            name: &'static str,
            default: T,
            expected: &'static str,
        ) -> Result<T, ConfigError> {
            match lookup(name) {
                None => Ok(default),
                Some(value) => value.trim().parse().map_err(|_| ConfigError {
                    name,
                    value,
                    expected,
                }),
            }
        }
        let role = match lookup("ROLE").as_deref().map(str::trim) {
            None | Some("all") => Role::All,
            Some("web") => Role::Web,
            Some("worker") => Role::Worker,
            Some(other) => {
                return Err(ConfigError {
                    name: "ROLE",
                    value: other.to_owned(),
                    expected: "one of web, worker, all",
                })
            }
        };
        let mail_fail_rate: f64 =
            parsed(&lookup, "MAIL_FAIL_RATE", 0.0, "a number from 0.0 to 1.0")?;
        if !(0.0..=1.0).contains(&mail_fail_rate) {
            return Err(ConfigError {
                name: "MAIL_FAIL_RATE",
                value: mail_fail_rate.to_string(),
                expected: "a number from 0.0 to 1.0",
            });
        }
        let admin_token =
            match lookup("ADMIN_TOKEN") {
                None => None,
                Some(token) if !strong_enough(token.trim()) => return Err(ConfigError {
                    name: "ADMIN_TOKEN",
                    value: "(hidden)".to_owned(),
                    expected:
                        "at least 16 characters, 8 of them different (try: openssl rand -hex 24)",
                }),
                Some(token) => Some(token.trim().to_owned()),
            };
        let export_defaults = crate::jobs::exports::ExportSettings::default();
        let millis = |name, default: Duration| -> Result<Duration, ConfigError> {
            let default = u64::try_from(default.as_millis()).unwrap_or(u64::MAX);
            parsed(&lookup, name, default, "milliseconds").map(Duration::from_millis)
        };
        let export = crate::jobs::exports::ExportSettings {
            timeout: millis("EXPORT_TIMEOUT_MS", export_defaults.timeout)?,
            batch_size: match parsed(
                &lookup,
                "EXPORT_BATCH_SIZE",
                export_defaults.batch_size,
                "a number of users from 1",
            )? {
                0 => {
                    return Err(ConfigError {
                        name: "EXPORT_BATCH_SIZE",
                        value: "0".to_owned(),
                        expected: "a number of users from 1",
                    })
                }
                size => size,
            },
            pause: millis("EXPORT_BATCH_PAUSE_MS", export_defaults.pause)?,
        };
        let redis_cluster_nodes = lookup("REDIS_CLUSTER_NODES")
            .map(|nodes| {
                nodes
                    .split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .filter(|nodes| !nodes.is_empty());
        let default_prefix = if redis_cluster_nodes.is_some() {
            "{bull}"
        } else {
            queue_core::app::DEFAULT_PREFIX
        };
        Ok(Config {
            export,
            redis_cluster_nodes,
            report_email: lookup("REPORT_EMAIL").unwrap_or_else(|| "reports@localhost".to_owned()),
            keys: match lookup("QUEUE_KEYS") {
                Some(text) => Keys::Text(text),
                None => Keys::File(
                    lookup("QUEUE_KEYS_FILE")
                        .unwrap_or_else(|| "welcome.keys".to_owned())
                        .into(),
                ),
            },
            admin_token,
            port: parsed(&lookup, "PORT", 3000, "a port number")?,
            redis_url: lookup("REDIS_URL")
                .unwrap_or_else(|| queue_core::app::DEFAULT_REDIS_URL.to_owned()),
            database_url: lookup("DATABASE_URL")
                .unwrap_or_else(|| "sqlite://welcome.db".to_owned()),
            queue_prefix: lookup("QUEUE_PREFIX").unwrap_or_else(|| default_prefix.to_owned()),
            role,
            mail_fail_rate,
            tz: parsed(
                &lookup,
                "TZ",
                chrono_tz::UTC,
                "an IANA time zone such as Europe/Paris",
            )?,
            welcome_backoff: millis("WELCOME_BACKOFF_MS", Duration::from_secs(3))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Config::from_lookup(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn defaults_and_refusals() {
        let c = config(&[]).unwrap();
        assert_eq!((c.port, c.role, c.tz), (3000, Role::All, chrono_tz::UTC));
        assert_eq!(c.database_url, "sqlite://welcome.db");
        assert!(config(&[("ROLE", "both")])
            .unwrap_err()
            .to_string()
            .contains("one of web, worker, all"));
        assert!(config(&[("MAIL_FAIL_RATE", "1.5")]).is_err());
        assert!(config(&[("TZ", "Mars/Olympus")])
            .unwrap_err()
            .to_string()
            .contains("IANA"));
        assert_eq!(config(&[("ROLE", "worker")]).unwrap().role, Role::Worker);
        assert_eq!(c.admin_token, None);
        assert_eq!(c.export.timeout, Duration::from_secs(300));
        assert_eq!(c.redis_cluster_nodes, None);
        let cluster = config(&[("REDIS_CLUSTER_NODES", "redis://a:7000, redis://b:7000")]).unwrap();
        assert_eq!(
            cluster.redis_cluster_nodes.as_deref(),
            Some(&["redis://a:7000".to_owned(), "redis://b:7000".to_owned()][..])
        );
        assert_eq!(cluster.queue_prefix, "{bull}");
        assert!(config(&[("EXPORT_BATCH_SIZE", "0")]).is_err());
        assert_eq!(
            config(&[("EXPORT_TIMEOUT_MS", "250")])
                .unwrap()
                .export
                .timeout,
            Duration::from_millis(250)
        );
        let short = config(&[("ADMIN_TOKEN", "hunter2")])
            .unwrap_err()
            .to_string();
        assert!(
            short.contains("at least 16") && !short.contains("hunter2"),
            "{short}"
        );
        // Long enough, but a letter repeated or a word twice is guessed at once.
        for weak in [
            "aaaaaaaaaaaaaaaa",
            "passwordpassword",
            "abababababababababab",
        ] {
            let refused = config(&[("ADMIN_TOKEN", weak)]).unwrap_err().to_string();
            assert!(
                refused.contains("8 of them different") && !refused.contains(weak),
                "{refused}"
            );
        }
        let long = "0123456789abcdef0123";
        assert_eq!(
            config(&[("ADMIN_TOKEN", long)])
                .unwrap()
                .admin_token
                .as_deref(),
            Some(long)
        );
    }
}
