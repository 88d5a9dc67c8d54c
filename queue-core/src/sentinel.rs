//! Redis Sentinel: the deployment an app finds its master through, from a builder or a
//! `redis+sentinel://` URL.

use std::fmt;

use crate::error::Error;

/// The URL schemes of a Sentinel deployment: plain, and TLS.
const SCHEMES: [(&str, bool); 2] = [("redis+sentinel", false), ("rediss+sentinel", true)];
/// The query parameters a Sentinel URL may carry.
const PARAMETERS: &str = "sentinel_username, sentinel_password, sentinel_tls";

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
///   (`sentinel_tls=false` for sentinels without TLS); [`Tls`](crate::Tls) adds a private
///   CA or client certificates for both;
/// - sentinels often have no password; `sentinel_password` (and `sentinel_username`)
///   are theirs when they do.
///
/// ```
/// use queue_core::Sentinel;
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

    /// Whether `url` is a Sentinel URL (`redis+sentinel://` or `rediss+sentinel://`).
    pub fn is_sentinel_url(url: &str) -> bool {
        url.split_once("://")
            .is_some_and(|(scheme, _)| SCHEMES.iter().any(|(s, _)| s.eq_ignore_ascii_case(scheme)))
    }

    /// Reads a `redis+sentinel://` or `rediss+sentinel://` URL (see [`Sentinel`]).
    /// A URL that does not fit is refused with [`Error::InvalidOption`] (option
    /// `redis`), saying what is wrong and never quoting a password.
    pub fn from_url(url: &str) -> Result<Self, Error> {
        parse(url).map_err(|reason| Error::InvalidOption {
            option: "redis",
            reason: format!("not a Sentinel URL ({reason}); expected `redis+sentinel://[user:password@]host:port[,host:port...]/master_name[/db]`"),
        })
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

fn parse(url: &str) -> Result<Sentinel, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or("no scheme: it starts with `redis+sentinel://` or `rediss+sentinel://`")?;
    let tls = SCHEMES
        .iter()
        .find(|(s, _)| s.eq_ignore_ascii_case(scheme))
        .map(|(_, tls)| *tls)
        .ok_or_else(|| {
            format!("the scheme `{scheme}` is not `redis+sentinel` or `rediss+sentinel`")
        })?;
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, Some(query)),
        None => (rest, None),
    };
    // The user information ends at the last `@` before the path.
    let (userinfo, rest) = match rest.rfind('@') {
        Some(at) if !rest[..at].contains('/') => (Some(&rest[..at]), &rest[at + 1..]),
        _ => (None, rest),
    };
    let (hosts, path) = rest
        .split_once('/')
        .ok_or("no master name: the path names it, as in `.../mymaster`")?;
    let sentinels: Vec<String> = hosts.split(',').map(|h| h.trim().to_owned()).collect();
    if sentinels.iter().any(String::is_empty) {
        return Err("an empty sentinel address (hosts are separated by single commas)".into());
    }
    let mut path = path.trim_end_matches('/').splitn(2, '/');
    let master_name = decode(path.next().unwrap_or_default(), "the master name")?;
    if master_name.is_empty() {
        return Err("no master name: the path names it, as in `.../mymaster`".into());
    }
    let db = match path.next() {
        None => None,
        Some(db) => Some(
            db.parse::<u8>()
                .map_err(|_| format!("`{db}` after the master name is not a database number"))?,
        ),
    };
    let mut sentinel = Sentinel::new(master_name, sentinels);
    sentinel.db = db;
    sentinel.tls = tls;
    sentinel.sentinel_tls = tls;
    if let Some(userinfo) = userinfo {
        let (user, password) = match userinfo.split_once(':') {
            Some((user, password)) => (user, Some(password)),
            None => (userinfo, None),
        };
        sentinel.username = Some(decode(user, "the user name")?).filter(|u| !u.is_empty());
        sentinel.password = password.map(|p| decode(p, "the password")).transpose()?;
    }
    for pair in query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sentinel_username" => {
                sentinel.sentinel_username = Some(decode(value, "sentinel_username")?)
            }
            "sentinel_password" => {
                sentinel.sentinel_password = Some(decode(value, "sentinel_password")?)
            }
            "sentinel_tls" => {
                sentinel.sentinel_tls = match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err(format!("sentinel_tls is `true` or `false`, not `{value}`")),
                }
            }
            other => {
                return Err(format!(
                    "unknown parameter `{other}`; the parameters are {PARAMETERS}"
                ))
            }
        }
    }
    sentinel.validate().map_err(|e| match e {
        Error::InvalidOption { reason, .. } => reason,
        other => other.to_string(),
    })?;
    Ok(sentinel)
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

/// Percent-decoding, as URLs encode user names, passwords and names.
fn decode(text: &str, what: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{what} has a `%` not followed by two hex digits"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{what} is not UTF-8 once decoded"))
}

#[cfg(test)]
mod tests {
    use super::Sentinel;

    fn refused(url: &str) -> String {
        Sentinel::from_url(url).unwrap_err().to_string()
    }

    #[test]
    fn a_full_url_reads_every_part() {
        let s = Sentinel::from_url(
            "rediss+sentinel://app:p%40ss@a:26380,[::1],b/my%2Fmaster/3?sentinel_username=watch&sentinel_password=w%3Ard&sentinel_tls=false",
        )
        .unwrap();
        assert_eq!(s.master_name, "my/master");
        assert_eq!(s.sentinels, ["a:26380", "[::1]", "b"]);
        assert_eq!(s.username.as_deref(), Some("app"));
        assert_eq!(s.password.as_deref(), Some("p@ss"));
        assert_eq!(s.db, Some(3));
        assert!(s.tls);
        assert_eq!(s.sentinel_username.as_deref(), Some("watch"));
        assert_eq!(s.sentinel_password.as_deref(), Some("w:rd"));
        assert!(!s.sentinel_tls);
        let shown = s.to_string();
        assert!(!shown.contains("p@ss") && !shown.contains("w:rd") && !shown.contains("%"));
    }

    #[test]
    fn the_smallest_url_and_the_user_forms_of_a_plain_url() {
        let s = Sentinel::from_url("redis+sentinel://h/m").unwrap();
        assert_eq!(s, Sentinel::new("m", ["h"]));
        assert!(!s.tls && !s.sentinel_tls);
        let only_password = Sentinel::from_url("redis+sentinel://:pw@h/m").unwrap();
        assert_eq!(
            (only_password.username, only_password.password.as_deref()),
            (None, Some("pw"))
        );
        let only_user = Sentinel::from_url("redis+sentinel://u@h/m/").unwrap();
        assert_eq!(
            (only_user.username.as_deref(), only_user.password),
            (Some("u"), None)
        );
        assert!(Sentinel::is_sentinel_url("REDISS+SENTINEL://h/m"));
        assert!(!Sentinel::is_sentinel_url("redis://h:6379"));
    }

    #[test]
    fn bad_urls_say_what_is_wrong_without_the_password() {
        for (url, says) in [
            ("redis://h/m", "scheme `redis`"),
            ("redis+sentinel://h", "no master name"),
            ("redis+sentinel://h/", "no master name"),
            ("redis+sentinel://h,,k/m", "empty sentinel address"),
            ("redis+sentinel://h:x/m", "not a port"),
            ("redis+sentinel://h:0/m", "not a port"),
            ("redis+sentinel://::1/m", "brackets"),
            ("redis+sentinel://h/m/x", "not a database number"),
            (
                "redis+sentinel://h/m?db=2",
                "sentinel_username, sentinel_password, sentinel_tls",
            ),
            ("redis+sentinel://h/m?sentinel_tls=yes", "`true` or `false`"),
            ("redis+sentinel://:p%zz@h/m", "two hex digits"),
        ] {
            let err = refused(url);
            assert!(err.contains(says), "{url}: {err}");
        }
        let err = refused("redis+sentinel://:s3cret@h:x/m?sentinel_password=s3ntinel");
        assert!(
            !err.contains("s3cret") && !err.contains("s3ntinel"),
            "{err}"
        );
    }

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
