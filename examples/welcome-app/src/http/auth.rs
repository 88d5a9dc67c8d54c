//! Credentials: the access token a user gets at sign-up (only its SHA-256 is stored),
//! and the operator's `ADMIN_TOKEN`. Both travel as `Authorization: Bearer <token>`,
//! which a browser never attaches on its own, so no other site can make a visitor's
//! browser use them.

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
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

/// Whether the request carries the operator's token.
pub(crate) fn is_operator(state: &AppState, headers: &HeaderMap) -> bool {
    match (&state.admin_token, bearer(headers)) {
        (Some(admin), Some(given)) => same(admin, given),
        _ => false,
    }
}

/// Refuses a request that is not the operator's: 403 when operator actions are
/// disabled (no `ADMIN_TOKEN`), 401 without the right token.
pub(crate) fn require_operator(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if state.admin_token.is_none() {
        return Err(ApiError::Forbidden(
            "operator actions are disabled: the service runs without ADMIN_TOKEN".to_owned(),
        ));
    }
    if is_operator(state, headers) {
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
    match require_operator(&state, request.headers()) {
        Ok(()) => next.run(request).await,
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
