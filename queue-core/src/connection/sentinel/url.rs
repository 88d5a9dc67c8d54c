//! Reading a `redis+sentinel://` URL.

use super::Sentinel;
use crate::error::Error;

/// The URL schemes of a Sentinel deployment: plain, and TLS.
const SCHEMES: [(&str, bool); 2] = [("redis+sentinel", false), ("rediss+sentinel", true)];
/// The query parameters a Sentinel URL may carry.
const PARAMETERS: &str = "sentinel_username, sentinel_password, sentinel_tls";

/// Whether `url`'s scheme is a Sentinel one.
pub(super) fn is_sentinel_url(url: &str) -> bool {
    url.split_once("://")
        .is_some_and(|(scheme, _)| SCHEMES.iter().any(|(s, _)| s.eq_ignore_ascii_case(scheme)))
}

/// The deployment `url` names, or what is wrong with it (never quoting a password).
pub(super) fn parse(url: &str) -> Result<Sentinel, String> {
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

impl Sentinel {
    /// Whether `url` is a Sentinel URL (`redis+sentinel://` or `rediss+sentinel://`).
    pub fn is_sentinel_url(url: &str) -> bool {
        is_sentinel_url(url)
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
}
