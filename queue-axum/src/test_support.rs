//! What the unit tests of several modules share.

use axum::http::HeaderMap;

/// A header map of `pairs`.
pub(crate) fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.insert(*name, value.parse().unwrap());
    }
    headers
}
