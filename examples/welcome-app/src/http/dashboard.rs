//! The queue dashboard at `/admin/queues`, for the operator only. A browser cannot send
//! a bearer token on its own, so the page also takes HTTP Basic credentials: any user
//! name, the `ADMIN_TOKEN` as the password. A browser does attach those to every
//! request once given, cross-site ones too; the dashboard refuses actions that do not
//! come from its own pages, which is what makes that safe.

use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use axum::Router;
use base64::Engine as _;
use queue_axum::dashboard::{Access, Dashboard};
use queue_core::QueueApp;

use super::auth::{bearer, same};

/// The dashboard, for the holder of `admin_token`.
pub(crate) fn router(app: &QueueApp, admin_token: String) -> Router {
    let policy = move |request: &Parts| {
        if let Some(token) = bearer(&request.headers) {
            if same(&admin_token, token) {
                return Access::operator("operator (bearer token)").with_payloads();
            }
        }
        match basic(&request.headers) {
            Some((user, password)) if same(&admin_token, &password) => {
                Access::operator(user).with_payloads()
            }
            _ => Access::login_required(HeaderValue::from_static(
                "Basic realm=\"welcome-app queues\", charset=\"UTF-8\"",
            )),
        }
    };
    Dashboard::new(app, policy).router()
}

/// `Authorization: Basic base64(user:password)`, decoded.
fn basic(headers: &axum::http::HeaderMap) -> Option<(String, String)> {
    let encoded = headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    // The user name goes into the audit log: keep it short and printable.
    let user: String = user.chars().filter(|c| !c.is_control()).take(64).collect();
    Some((user, password.to_owned()))
}
