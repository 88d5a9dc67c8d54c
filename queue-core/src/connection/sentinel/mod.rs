//! Redis Sentinel: the deployment an app finds its master through, from a builder or a
//! `redis+sentinel://` URL.

use std::fmt;

use crate::error::Error;

mod url;

/// A Redis Sentinel deployment: the master's name, the sentinels that keep it, and how
/// to reach both. Every connection the app opens asks the sentinels for the master and
/// asks again when it loses it, so producers, workers, queue events and the outbox
/// relay follow a failover.
///
/// Give it to [`QueueAppBuilder::redis_sentinel`](crate::QueueAppBuilder::redis_sentinel),
/// or write it as a URL for [`QueueAppBuilder::redis`](crate::QueueAppBuilder::redis):
///
/// ```text
/// redis+sentinel://[user:password@]host1:26379,host2:26379,host3:26379/mymaster[/db]
///     [?sentinel_username=..&sentinel_password=..&sentinel_tls=false]
/// ```
///
/// - the user and password are the master's (and its replicas'), as in a `redis://` URL
///   (percent-encode `@ : / ? # %` in them);
/// - each host is a sentinel (port 26379 when left out; IPv6 in brackets);
/// - the path is the name in `sentinel monitor <name> ...`, then an optional database;
/// - `rediss+sentinel://` speaks TLS to the master and to the sentinels
///   (`sentinel_tls=false` for sentinels without TLS); [`Tls`](crate::connection::Tls) adds a private
///   CA or client certificates for both;
/// - sentinels often have no password; `sentinel_password` (and `sentinel_username`)
///   are theirs when they do.
///
/// ```
/// use queue_core::connection::Sentinel;
///
/// let from_url = Sentinel::from_url(
///     "redis+sentinel://:s3cret@10.0.0.1,10.0.0.2:26380/mymaster/2?sentinel_password=s3ntinel",
/// )?;
/// let built = Sentinel::new("mymaster", ["10.0.0.1", "10.0.0.2:26380"])
///     .password("s3cret")
///     .db(2)
///     .sentinel_password("s3ntinel");
/// assert_eq!(from_url, built);
/// // Passwords never reach messages or logs.
/// assert_eq!(
///     from_url.to_string(),
///     "redis+sentinel://:***@10.0.0.1,10.0.0.2:26380/mymaster/2?sentinel_password=***"
/// );
/// # Ok::<(), queue_core::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
#[must_use = "a Sentinel does nothing until it is given to `QueueAppBuilder::redis_sentinel`"]
pub struct Sentinel {
    pub(crate) master_name: String,
    pub(crate) sentinels: Vec<String>,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) db: Option<u8>,
    pub(crate) tls: bool,
    pub(crate) sentinel_username: Option<String>,
    pub(crate) sentinel_password: Option<String>,
    pub(crate) sentinel_tls: bool,
}

impl Sentinel {
    /// The master called `master_name` (as in `sentinel monitor <name> ...`), kept by
    /// `sentinels` (`host:port`, or `host` for port 26379), asked in this order.
    pub fn new<I, S>(master_name: impl Into<String>, sentinels: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Sentinel {
            master_name: master_name.into(),
            sentinels: sentinels.into_iter().map(Into::into).collect(),
            username: None,
            password: None,
            db: None,
            tls: false,
            sentinel_username: None,
            sentinel_password: None,
            sentinel_tls: false,
        }
    }

    /// The master's ACL user.
    pub fn username(mut self, username: impl Into<String>) -> Self {
        self.username = Some(username.into());
        self
    }

    /// The master's password.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// The database to select on the master (0 when not set).
    pub fn db(mut self, db: u8) -> Self {
        self.db = Some(db);
        self
    }

    /// Speak TLS to the master (and its replicas, once promoted).
    pub fn tls(mut self, tls: bool) -> Self {
        self.tls = tls;
        self
    }

    /// The sentinels' ACL user.
    pub fn sentinel_username(mut self, username: impl Into<String>) -> Self {
        self.sentinel_username = Some(username.into());
        self
    }

    /// The sentinels' password (their `requirepass`).
    pub fn sentinel_password(mut self, password: impl Into<String>) -> Self {
        self.sentinel_password = Some(password.into());
        self
    }

    /// Speak TLS to the sentinels.
    pub fn sentinel_tls(mut self, tls: bool) -> Self {
        self.sentinel_tls = tls;
        self
    }

    /// Checks what the engine will need, so that `build` refuses a bad deployment
    /// before connecting.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        let invalid = |reason: String| Error::InvalidOption {
            option: "redis_sentinel",
            reason,
        };
        if self.master_name.trim().is_empty() {
            return Err(invalid(
                "the master's name is empty (the name in `sentinel monitor <name> ...`)".into(),
            ));
        }
        if self.sentinels.is_empty() {
            return Err(invalid("no sentinel given".into()));
        }
        for address in &self.sentinels {
            check_address(address).map_err(invalid)?;
        }
        Ok(())
    }
}

impl fmt::Display for Sentinel {
    /// The URL form, with `***` for each password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls {
            "rediss+sentinel"
        } else {
            "redis+sentinel"
        };
        write!(f, "{scheme}://")?;
        match (&self.username, &self.password) {
            (Some(user), Some(_)) => write!(f, "{user}:***@")?,
            (None, Some(_)) => f.write_str(":***@")?,
            (Some(user), None) => write!(f, "{user}@")?,
            (None, None) => {}
        }
        write!(f, "{}/{}", self.sentinels.join(","), self.master_name)?;
        if let Some(db) = self.db {
            write!(f, "/{db}")?;
        }
        let mut query = Vec::new();
        if let Some(user) = &self.sentinel_username {
            query.push(format!("sentinel_username={user}"));
        }
        if self.sentinel_password.is_some() {
            query.push("sentinel_password=***".to_owned());
        }
        if self.sentinel_tls != self.tls {
            query.push(format!("sentinel_tls={}", self.sentinel_tls));
        }
        if !query.is_empty() {
            write!(f, "?{}", query.join("&"))?;
        }
        Ok(())
    }
}

impl fmt::Debug for Sentinel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Sentinel").field(&self.to_string()).finish()
    }
}

/// `host:port`, `host`, `[v6]:port` or `[v6]`, with a port from 1 to 65535.
fn check_address(address: &str) -> Result<(), String> {
    let port = match address.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((host, "")) if !host.is_empty() => None,
            Some((host, after)) if !host.is_empty() => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| format!("sentinel `{address}`: expected `:port` after `]`"))?,
            ),
            _ => return Err(format!("sentinel `{address}`: not `[host]:port`")),
        },
        None => match address.rsplit_once(':') {
            Some((host, _)) if host.contains(':') => {
                return Err(format!(
                    "sentinel `{address}`: write an IPv6 address in brackets, `[host]:port`"
                ))
            }
            Some(("", _)) => return Err(format!("sentinel `{address}`: no host")),
            Some((_, port)) => Some(port),
            None => None,
        },
    };
    match port.map(|p| p.parse::<u16>()) {
        None | Some(Ok(1..)) => Ok(()),
        Some(_) => Err(format!("sentinel `{address}`: not a port after the `:`")),
    }
}

#[cfg(test)]
mod tests {
    use super::Sentinel;

    #[test]
    fn a_built_deployment_is_checked_like_a_url() {
        assert!(Sentinel::new("m", ["h:26379"]).validate().is_ok());
        for (sentinel, says) in [
            (Sentinel::new("", ["h"]), "name is empty"),
            (Sentinel::new("m", Vec::<String>::new()), "no sentinel"),
            (Sentinel::new("m", ["h:99999"]), "not a port"),
        ] {
            let err = sentinel.validate().unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
        }
    }
}
