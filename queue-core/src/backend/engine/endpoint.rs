//! Where the app's Redis is, as the builder was told: one server, a Redis Cluster's
//! seed nodes, or a Redis Sentinel deployment.

use std::borrow::Cow;

use crate::connection::Sentinel;
use crate::error::Error;

/// Where the app's Redis is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `redis://` or `rediss://`; or a `redis+sentinel://` URL, read at
    /// [`Endpoint::resolved`].
    Single(String),
    /// Seed nodes of a cluster, each a `redis://` or `rediss://` URL.
    Cluster(Vec<String>),
    /// The master a Sentinel deployment names.
    Sentinel(Sentinel),
}

impl Endpoint {
    /// A `redis+sentinel://` URL given to `redis(..)` read as the deployment it names
    /// (refused, with the reason, when it does not fit); anything else as it is.
    pub(crate) fn resolved(&self) -> Result<Cow<'_, Endpoint>, Error> {
        match self {
            Endpoint::Single(url) if Sentinel::is_sentinel_url(url) => {
                Ok(Cow::Owned(Endpoint::Sentinel(Sentinel::from_url(url)?)))
            }
            Endpoint::Sentinel(sentinel) => {
                sentinel.validate()?;
                Ok(Cow::Borrowed(self))
            }
            _ => Ok(Cow::Borrowed(self)),
        }
    }

    /// The URLs to connect to directly: the server, or the seed nodes (none for a
    /// Sentinel deployment, whose master the sentinels name).
    pub(super) fn urls(&self) -> &[String] {
        match self {
            Endpoint::Single(url) => std::slice::from_ref(url),
            Endpoint::Cluster(nodes) => nodes,
            Endpoint::Sentinel(_) => &[],
        }
    }

    /// For messages and logs: the URL, the seed nodes, or the deployment, without
    /// passwords.
    pub(super) fn display(&self) -> String {
        match self {
            Endpoint::Single(url) => redact_password(url),
            Endpoint::Cluster(nodes) => {
                let nodes: Vec<String> = nodes.iter().map(|n| redact_password(n)).collect();
                format!("cluster({})", nodes.join(", "))
            }
            Endpoint::Sentinel(sentinel) => sentinel.to_string(),
        }
    }
}

/// `redis://user:secret@host` -> `redis://user:***@host`, for messages and logs.
fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None if userinfo.is_empty() => url.to_owned(),
        // `redis://secret@host` is a password-only URL in the redis crate.
        None => format!("{scheme}://***@{host}"),
    }
}

#[cfg(test)]
mod tests {
    use super::{redact_password, Endpoint};

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact_password("redis://u:pw@h:6379/2"),
            "redis://u:***@h:6379/2"
        );
        assert_eq!(redact_password("rediss://:pw@h"), "rediss://:***@h");
        assert_eq!(redact_password("redis://pw@h"), "redis://***@h");
        assert_eq!(
            redact_password("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
    }

    #[test]
    fn a_sentinel_url_is_read_as_the_deployment_it_names() {
        let url = "redis+sentinel://:pw@a:26379,b:26379/mymaster?sentinel_password=spw";
        let endpoint = Endpoint::Single(url.to_owned());
        let resolved = endpoint.resolved().unwrap();
        assert!(matches!(&*resolved, Endpoint::Sentinel(s) if s.master_name == "mymaster"));
        assert_eq!(
            resolved.display(),
            "redis+sentinel://:***@a:26379,b:26379/mymaster?sentinel_password=***"
        );
        let bad = Endpoint::Single("redis+sentinel://:pw@a:x/mymaster".to_owned());
        let err = bad.resolved().unwrap_err().to_string();
        assert!(err.contains("not a port") && !err.contains("pw@"), "{err}");
        // Other URLs are left to the redis crate.
        let plain = Endpoint::Single("redis://h:6379".to_owned());
        assert_eq!(*plain.resolved().unwrap(), plain);
    }
}
