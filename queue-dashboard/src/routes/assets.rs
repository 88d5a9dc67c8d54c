//! The embedded assets, served from the dashboard's own origin as its CSP requires.

use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::view;

/// `GET /-/assets/dashboard.css`.
pub(super) async fn stylesheet() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        view::STYLESHEET,
    )
        .into_response()
}

/// `GET /-/assets/live.js`.
pub(super) async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        view::SCRIPT,
    )
        .into_response()
}
