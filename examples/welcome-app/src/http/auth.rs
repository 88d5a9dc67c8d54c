//! Credentials: the access token a user gets at sign-up (only its SHA-256 is stored),
//! and the operator's `ADMIN_TOKEN`. Both travel as `Authorization: Bearer <token>`,
//! which a browser never attaches on its own, so no other site can make a visitor's
//! browser use them.

use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use queue_axum::access::AccessPolicy;
use sha2::{Digest, Sha256};

use super::{ApiError, AppState};

/// The bearer token of a request, if it has one.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|token| !token.is_empty())
}

/// A new access token: 244 random bits, as 64 hex digits.
pub(crate) fn new_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// What is stored of a token.
pub(crate) fn token_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Compares without stopping at the first difference, so that timing tells nothing.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |diff, (x, y)| diff | (x ^ y))
            == 0
}

/// Whether the request carries the operator's token: the operator's policy decides,
/// counting wrong tokens per client address (too many: 429 for a minute), as the
/// dashboard does with the same policy.
pub(crate) fn operator_access(state: &AppState, request: &Parts) -> Result<bool, ApiError> {
    let Some(policy) = &state.operator else {
        return Ok(false);
    };
    let access = policy.decide(request);
    match access.retry_after() {
        Some(after) => Err(ApiError::TooManyFailures(after)),
        None => Ok(access.can_act()),
    }
}

/// Refuses a request that is not the operator's: 403 when operator actions are
/// disabled (no `ADMIN_TOKEN`), 401 without the right token, 429 after too many wrong
/// ones.
pub(crate) fn require_operator(state: &AppState, request: &Parts) -> Result<(), ApiError> {
    if state.operator.is_none() {
        return Err(ApiError::Forbidden(
            "operator actions are disabled: the service runs without ADMIN_TOKEN".to_owned(),
        ));
    }
    if operator_access(state, request)? {
        Ok(())
    } else {
        Err(ApiError::Unauthorized(
            "this is an operator action: send Authorization: Bearer <ADMIN_TOKEN>".to_owned(),
        ))
    }
}

/// A layer for routes only the operator may use.
pub(crate) async fn operator_only(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    match require_operator(&state, &parts) {
        Ok(()) => next.run(Request::from_parts(parts, body)).await,
        Err(refused) => refused.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_compared_whole() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(same(&a, &a.clone()));
        assert!(!same(&a, &b) && !same(&a, &a[..63]));
        assert_eq!(
            token_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
