//! How many new keys one caller claims in a window: without a bound, one client fills
//! Redis with records (2,000 unauthenticated keys in a few seconds were 1.26 MB, kept for
//! the whole ttl).

use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use queue_core::claims::Claims;

use super::key;
use super::settings::Settings;
use crate::rejection::TooManyIdempotencyKeys;

/// The answer to a caller over its bound of new keys (429), or `None` within it. The
/// caller is the application's scope (`scope_by`), else the client's address
/// (`crate::client`); a caller neither names is not counted, since one count for all
/// of them would let one client refuse everyone.
pub(super) async fn over(
    settings: &Settings,
    claims: &Claims,
    app_scope: Option<&str>,
    parts: &Parts,
) -> Option<Response> {
    let (max, window) = settings.new_keys?;
    let caller = match (app_scope, crate::client::of(parts)) {
        (Some(scope), _) => format!("scope:{scope}"),
        (None, Some(ip)) => format!("client:{ip}"),
        (None, None) => return None,
    };
    let bucket = format!("new-keys:{}", key::digest(&[caller.as_bytes()]));
    match claims.count(&bucket, window).await {
        Ok((n, _)) if n <= max => None,
        Ok((_, window_ends_within)) => {
            // At `debug`: a client over its bound sends many; each a line at `warn`
            // would be a lever on the logs.
            tracing::debug!(
                max,
                ?window,
                "a caller is over its bound of new Idempotency-Keys; 429"
            );
            Some(TooManyIdempotencyKeys { window_ends_within }.into_response())
        }
        // The count is a guard against floods, not the promise: a failed count does
        // not refuse the request it could not count.
        Err(error) => {
            tracing::debug!(%error, "the new-key count failed; the request runs");
            None
        }
    }
}
