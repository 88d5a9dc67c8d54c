//! Who may see and do what: the application's [`AccessPolicy`] decides per request; the
//! guard refuses what it does not allow, cross-site actions, and pages asked for by
//! another site's scripts, frames or images.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::view;
use super::{Base, Shared};

/// What a request may do on the dashboard, as the application's policy decided it.
///
/// ```
/// use queue_axum::dashboard::Access;
///
/// let nobody = Access::forbidden();
/// let viewer = Access::read_only("support");
/// let admin = Access::operator("alice").with_payloads();
/// assert!(!nobody.can_see() && viewer.can_see() && !viewer.can_act());
/// assert!(admin.can_act() && admin.sees_payloads());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    level: Level,
    who: String,
    payloads: bool,
    /// For a refusal that asks the browser to log in: the `WWW-Authenticate` value.
    challenge: Option<HeaderValue>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Forbidden,
    ReadOnly,
    Operator,
}

impl Access {
    /// Nothing: every page answers 403.
    pub fn forbidden() -> Self {
        Access {
            level: Level::Forbidden,
            who: String::new(),
            payloads: false,
            challenge: None,
        }
    }

    /// Nothing yet: the pages answer 401 with `www_authenticate` (e.g. `Basic
    /// realm="queues"`), so that a browser asks for credentials.
    pub fn login_required(www_authenticate: HeaderValue) -> Self {
        Access {
            challenge: Some(www_authenticate),
            ..Access::forbidden()
        }
    }

    /// May look, not act; `who` names the person in the logs.
    pub fn read_only(who: impl Into<String>) -> Self {
        Access {
            level: Level::ReadOnly,
            who: who.into(),
            ..Access::forbidden()
        }
    }

    /// May look and act (retry, remove, pause...); every action is logged with `who`.
    pub fn operator(who: impl Into<String>) -> Self {
        Access {
            level: Level::Operator,
            who: who.into(),
            ..Access::forbidden()
        }
    }

    /// Also sees job payloads and return values (hidden by default: they hold what users
    /// sent).
    pub fn with_payloads(mut self) -> Self {
        self.payloads = true;
        self
    }

    /// Whether the pages may be seen.
    pub fn can_see(&self) -> bool {
        self.level >= Level::ReadOnly
    }

    /// Whether actions may be taken.
    pub fn can_act(&self) -> bool {
        self.level == Level::Operator
    }

    /// Whether payloads and return values are shown.
    pub fn sees_payloads(&self) -> bool {
        self.payloads && self.can_see()
    }

    /// Who the policy said this is.
    pub fn who(&self) -> &str {
        &self.who
    }
}

/// The application's access decision for a request. Any
/// `Fn(&Parts) -> Access + Send + Sync + 'static` is one.
///
/// ```
/// use axum::http::request::Parts;
/// use queue_axum::dashboard::Access;
///
/// // An operator token in a header; everyone else is refused.
/// let policy = |request: &Parts| match request.headers.get("authorization") {
///     Some(value) if value == "Bearer s3cret-operator-token" => Access::operator("ops"),
///     _ => Access::forbidden(),
/// };
/// # let _: &dyn queue_axum::dashboard::AccessPolicy = &policy;
/// ```
pub trait AccessPolicy: Send + Sync + 'static {
    /// Decides what `request` may do.
    fn decide(&self, request: &Parts) -> Access;
}

impl<F> AccessPolicy for F
where
    F: Fn(&Parts) -> Access + Send + Sync + 'static,
{
    fn decide(&self, request: &Parts) -> Access {
        self(request)
    }
}

/// Decides access for every request, refuses what is not allowed, and adds the headers
/// every dashboard answer carries.
pub(super) async fn guard(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let base = Base::of(&parts, &shared.trusted_proxies);
    parts.extensions.insert(base);
    let access = shared.policy.decide(&parts);
    let refusal = if let (false, Some(challenge)) = (access.can_see(), access.challenge.clone()) {
        let mut response = view::error_page(
            StatusCode::UNAUTHORIZED,
            "Log in to see this dashboard.",
            None,
        );
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge);
        secure_headers(response.headers_mut());
        return response;
    } else if !access.can_see() {
        Some((StatusCode::FORBIDDEN, "You may not see this dashboard."))
    } else if parts.method != Method::POST && !may_read(&parts.headers) {
        Some((
            StatusCode::FORBIDDEN,
            "Cross-site request refused: the dashboard's pages are not another site's to load.",
        ))
    } else if parts.method == Method::POST && !access.can_act() {
        Some((
            StatusCode::FORBIDDEN,
            "This is an operator action; you may only look.",
        ))
    } else if parts.method == Method::POST && !same_origin(&parts.headers) {
        Some((
            StatusCode::FORBIDDEN,
            "Cross-site request refused: actions must come from the dashboard's own pages.",
        ))
    } else {
        None
    };
    let mut response = match refusal {
        Some((status, message)) => {
            if parts.method == Method::POST {
                tracing::warn!(
                    target: super::AUDIT_TARGET,
                    who = access.who(),
                    method = %parts.method,
                    path = %parts.uri.path(),
                    status = status.as_u16(),
                    "dashboard action refused"
                );
            }
            view::error_page(status, message, None)
        }
        None => {
            let mut request = Request::from_parts(parts, body);
            request.extensions_mut().insert(access);
            next.run(request).await
        }
    };
    secure_headers(response.headers_mut());
    response
}

/// Whether a state-changing request comes from a page of this origin: the browser's
/// `Sec-Fetch-Site` when it sends one, else `Origin` against `Host`. A request with
/// neither is refused: every browser sends one of them on a POST.
fn same_origin(headers: &HeaderMap) -> bool {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = value("sec-fetch-site") {
        return site == "same-origin";
    }
    match (value("origin"), value("host")) {
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host)),
        _ => false,
    }
}

/// Whether a read may be answered (the resource isolation policy): a request from the
/// dashboard's own pages, a person typing the address or opening a bookmark
/// (`Sec-Fetch-Site: none`), a browser that sends no fetch metadata, or a person
/// following a link from elsewhere (a top-level navigation to a document: the link in
/// the alert that names a job). Refused: another site's `fetch`, `<img>`, `<script>`,
/// `<iframe>`, `EventSource`, which would read or probe the pages with the operator's
/// credentials.
fn may_read(headers: &HeaderMap) -> bool {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match value("sec-fetch-site") {
        None | Some("same-origin" | "none") => true,
        Some(_) => {
            value("sec-fetch-mode") == Some("navigate")
                && matches!(value("sec-fetch-dest"), None | Some("document"))
        }
    }
}

/// No caching of job data, no framing (clickjacking), and only our own resources.
fn secure_headers(headers: &mut HeaderMap) {
    let set = |headers: &mut HeaderMap, name, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(headers, header::CACHE_CONTROL, "no-store");
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::REFERRER_POLICY, "same-origin");
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; \
         img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::headers;

    #[test]
    fn only_same_origin_posts_pass() {
        assert!(same_origin(&headers(&[("sec-fetch-site", "same-origin")])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "same-site")])));
        // Sec-Fetch-Site wins over a matching Origin.
        assert!(!same_origin(&headers(&[
            ("sec-fetch-site", "cross-site"),
            ("origin", "http://app.example"),
            ("host", "app.example"),
        ])));
        assert!(same_origin(&headers(&[
            ("origin", "https://app.example:8443"),
            ("host", "app.example:8443"),
        ])));
        assert!(!same_origin(&headers(&[
            ("origin", "https://evil.example"),
            ("host", "app.example"),
        ])));
        assert!(!same_origin(&headers(&[
            ("origin", "null"),
            ("host", "app.example")
        ])));
        assert!(!same_origin(&HeaderMap::new()));
    }

    #[test]
    fn other_sites_may_link_to_a_page_but_not_load_it() {
        assert!(may_read(&HeaderMap::new()));
        assert!(may_read(&headers(&[("sec-fetch-site", "same-origin")])));
        assert!(may_read(&headers(&[("sec-fetch-site", "none")])));
        assert!(may_read(&headers(&[
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
            ("sec-fetch-dest", "document"),
        ])));
        for (mode, dest) in [
            ("cors", "empty"),
            ("no-cors", "image"),
            ("no-cors", "script"),
            ("navigate", "iframe"),
        ] {
            assert!(!may_read(&headers(&[
                ("sec-fetch-site", "cross-site"),
                ("sec-fetch-mode", mode),
                ("sec-fetch-dest", dest),
            ])));
        }
        assert!(!may_read(&headers(&[("sec-fetch-site", "same-site")])));
    }
}
