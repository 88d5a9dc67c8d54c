//! Where the dashboard is mounted, for its links and redirects: the path it was nested
//! under, behind the `X-Forwarded-Prefix` of a reverse proxy that strips a sub-path,
//! believed only from a proxy the application named, and only as a plain path.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts, OriginalUri};
use axum::http::request::Parts;

use crate::text::url_segment;

/// The longest forwarded prefix taken.
const MAX_PREFIX: usize = 256;

/// The dashboard's own path, from the request; the guard puts it in the request's
/// extensions, where the pages read it.
#[derive(Debug, Clone)]
pub(crate) struct Base(String);

impl Base {
    /// The mount point of the request `parts`, behind a forwarded prefix when the
    /// connection comes from one of `trusted` (the peer address the server recorded:
    /// `into_make_service_with_connect_info`).
    pub(crate) fn of(parts: &Parts, trusted: &[IpAddr]) -> Base {
        let inner = parts.uri.path();
        let full = parts
            .extensions
            .get::<OriginalUri>()
            .map_or(inner, |original| original.path());
        let mounted = if inner == "/" {
            full
        } else {
            full.strip_suffix(inner).unwrap_or("")
        };
        let from_trusted = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .is_some_and(|ConnectInfo(peer)| trusted.contains(&peer.ip()));
        let forwarded = if from_trusted {
            parts
                .headers
                .get("x-forwarded-prefix")
                .and_then(|v| v.to_str().ok())
                .filter(|p| is_plain_path(p))
                .unwrap_or("")
        } else {
            ""
        };
        Base(
            format!("{forwarded}{mounted}")
                .trim_end_matches('/')
                .to_owned(),
        )
    }

    /// The mount point, without a trailing slash (empty at the root).
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The mount point itself (axum's `nest` routes `/admin/queues`, not
    /// `/admin/queues/`).
    pub(crate) fn home(&self) -> String {
        if self.0.is_empty() {
            "/".to_owned()
        } else {
            self.0.clone()
        }
    }

    /// One of the embedded assets.
    pub(crate) fn asset(&self, file: &str) -> String {
        format!("{}/-/assets/{file}", self.0)
    }

    /// The workers page.
    pub(crate) fn workers(&self) -> String {
        format!("{}/-/workers", self.0)
    }

    /// A queue's page.
    pub(crate) fn queue(&self, queue: &str) -> String {
        format!("{}/{}", self.0, url_segment(queue))
    }

    /// A queue's groups page.
    pub(crate) fn groups(&self, queue: &str) -> String {
        format!("{}/groups", self.queue(queue))
    }

    /// A job's page.
    pub(crate) fn job(&self, queue: &str, id: &str) -> String {
        format!("{}/jobs/{}", self.queue(queue), url_segment(id))
    }
}

/// Whether a forwarded prefix is a plain absolute path: `/` then segments of unreserved
/// characters, none empty, `.` or `..`. Refused: `//evil.example` (a scheme-relative
/// URL in a link or `Location`), quotes, `..`, anything to escape.
fn is_plain_path(prefix: &str) -> bool {
    prefix.len() <= MAX_PREFIX
        && prefix.starts_with('/')
        && prefix
            .trim_end_matches('/')
            .split('/')
            .skip(1)
            .all(|segment| {
                !segment.is_empty()
                    && segment != "."
                    && segment != ".."
                    && segment
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.~".contains(&b))
            })
}

impl<S: Send + Sync> FromRequestParts<S> for Base {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<Base>()
            .cloned()
            .unwrap_or_else(|| Base::of(parts, &[])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_paths_are_prefixes() {
        for good in ["/ops", "/ops/", "/a/b-c_d.e~f", "/"] {
            assert!(is_plain_path(good), "{good}");
        }
        for bad in [
            "//evil.example",
            "ops",
            "/a//b",
            "/../x",
            "/a/./b",
            "/\"><script>",
            "/a b",
            "/%2F%2Fevil",
            "https://evil.example",
            "",
        ] {
            assert!(!is_plain_path(bad), "{bad}");
        }
        assert!(!is_plain_path(&format!("/{}", "a".repeat(MAX_PREFIX))));
    }
}
