//! The dashboard's guard: the application's policy decides each request; what it does
//! not allow ([`refusal`](queue_axum::access::refusal)) is answered with the dashboard's
//! refusal page, a refused action is audited, and every answer carries the dashboard's
//! security headers.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use queue_axum::access::{refusal, Refusal};

use crate::audit;
use crate::base::Base;
use crate::state::Shared;
use crate::view;

/// Decides access for every request, refuses what is not allowed, and adds the headers
/// every dashboard answer carries.
pub(crate) async fn guard(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let base = Base::of(&parts, &shared.trusted_proxies);
    parts.extensions.insert(base);
    let access = shared.policy.decide(&parts);
    let mut response = match refusal(&access, &parts) {
        None => {
            let mut request = Request::from_parts(parts, body);
            request.extensions_mut().insert(access);
            next.run(request).await
        }
        Some(Refusal::LoginRequired(challenge)) => {
            let mut response = view::error_page(
                StatusCode::UNAUTHORIZED,
                "Log in to see this dashboard.",
                None,
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
            response
        }
        Some(refused) => {
            let status = refused.status();
            if parts.method == Method::POST {
                audit::refused(
                    &access,
                    parts.method.as_str(),
                    parts.uri.path(),
                    status.as_u16(),
                );
            }
            let mut response = view::error_page(status, message(&refused), None);
            if let Some(after) = refused.retry_after() {
                response.headers_mut().insert(header::RETRY_AFTER, after);
            }
            response
        }
    };
    secure_headers(response.headers_mut());
    response
}

/// What a refused person reads.
fn message(refused: &Refusal) -> &'static str {
    match refused {
        Refusal::CrossSiteRead => {
            "Cross-site request refused: the dashboard's pages are not another site's to load."
        }
        Refusal::ReadOnly => "This is an operator action; you may only look.",
        Refusal::CrossSiteAction => {
            "Cross-site request refused: actions must come from the dashboard's own pages."
        }
        Refusal::TooManyFailures(_) => {
            "Too many wrong credentials from your address: try again in a minute."
        }
        _ => "You may not see this dashboard.",
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
