//! One request through [`IdempotencyLayer`](super::IdempotencyLayer): its key and
//! fingerprint, the claim on the key, the route run to its end, and the answer kept or
//! the key freed.

use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::http::request::Parts;

use axum::body::{to_bytes, Body};
use axum::extract::{OriginalUri, Request};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::future::{BoxFuture, FutureExt};
use http_body::Body as _;
use queue_core::{claims::Claim, claims::ClaimToken, claims::Claims};
use tower::Service;

use super::bound;
use super::hold::{Held, LEASE};
use super::key;
use super::record::Record;
use super::seal::{self, SealKey, Sealed};
use super::settings::Settings;
use crate::access::Access;
use crate::carried::Carried;
use crate::error::QueueError;
use crate::rejection::{IdempotencyKeyInFlight, IdempotencyKeyReused, MissingIdempotencyKey};

/// The header a replayed answer carries, set to `true`.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// The service [`IdempotencyLayer`](super::IdempotencyLayer) wraps a route in.
#[derive(Clone)]
pub struct IdempotencyService<S> {
    inner: S,
    settings: Arc<Settings>,
}

impl<S> IdempotencyService<S> {
    pub(super) fn new(inner: S, settings: Arc<Settings>) -> Self {
        IdempotencyService { inner, settings }
    }
}

impl<S> std::fmt::Debug for IdempotencyService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotencyService").finish_non_exhaustive()
    }
}

impl<S> Service<Request> for IdempotencyService<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        // The clone that was polled ready serves this request; a fresh one waits.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let settings = self.settings.clone();
        Box::pin(async move { Ok(handle(settings, inner, request).await) })
    }
}

async fn handle<S>(settings: Arc<Settings>, mut inner: S, request: Request) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    let safe = [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE];
    if safe.contains(request.method()) {
        return call(&mut inner, request).await;
    }
    let key = match key::from_headers(request.headers()) {
        Ok(Some(key)) => key,
        Ok(None) if settings.require_key => return MissingIdempotencyKey.into_response(),
        Ok(None) => return call(&mut inner, request).await,
        Err(malformed) => return malformed.into_response(),
    };
    let claims = match &settings.claims {
        Ok(claims) => claims.clone(),
        Err(reason) => {
            tracing::error!(%reason, "IdempotencyLayer has no store");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let (parts, body) = request.into_parts();
    let Ok(body) = to_bytes(body, settings.max_body_bytes).await else {
        let message = format!(
            "a request with an Idempotency-Key has at most {} bytes",
            settings.max_body_bytes
        );
        let body = serde_json::json!({ "error": "payload too large", "message": message });
        return (StatusCode::PAYLOAD_TOO_LARGE, axum::Json(body)).into_response();
    };
    // The path as the client sent it, before any `nest` took its prefix off: two nested
    // routers' `/orders` are two routes.
    let path = parts
        .extensions
        .get::<OriginalUri>()
        .map_or(parts.uri.path(), |original| original.path());
    let (scope, app_scope) = caller_scope(&settings, &parts);
    let names: [&[u8]; 4] = [
        scope.as_deref().unwrap_or_default().as_bytes(),
        parts.method.as_str().as_bytes(),
        path.as_bytes(),
        key.as_bytes(),
    ];
    let record_key = key::digest(&names);
    let seal_key = SealKey::derive(&names);
    let content_type = parts.headers.get(header::CONTENT_TYPE);
    // Keyed by the seal key, so that a reader of Redis, who has no Idempotency-Key,
    // cannot test a guess of the request (a sign-up's e-mail address) against it.
    let fingerprint = key::digest(&[
        seal_key.as_bytes(),
        parts.uri.query().unwrap_or_default().as_bytes(),
        content_type.map_or(&[][..], HeaderValue::as_bytes),
        &body,
    ]);
    let lease = settings.hold.min(LEASE);
    let token = match claims.claim(&record_key, &fingerprint, lease).await {
        Ok(Claim::Taken(token)) => token,
        Ok(Claim::Held { tag, ends_within }) if tag == fingerprint => {
            return IdempotencyKeyInFlight { ends_within }.into_response();
        }
        Ok(Claim::Done { tag, outcome }) if tag == fingerprint => {
            let sealed_as = Sealed {
                key: &seal_key,
                record: &record_key,
                fingerprint: &fingerprint,
            };
            return replay(&sealed_as, &outcome);
        }
        Ok(_) => return IdempotencyKeyReused.into_response(),
        Err(e) => return QueueError(e).into_response(),
    };
    if let Some(refused) = bound::over(&settings, &claims, app_scope.as_deref(), &parts).await {
        release(&claims, &record_key, &token).await;
        return refused;
    }
    // The route runs to its end on a task of its own: a client that hangs up (its own
    // timeout, say) and retries gets the answer kept, not a second run. The task
    // carries what the request runs in: its trace, a wait around it, its span.
    let request = Request::from_parts(parts, Body::from(body));
    let task = tokio::spawn(Carried::here().around(async move {
        let route = AssertUnwindSafe(call(&mut inner, request)).catch_unwind();
        let held = Held {
            claims: &claims,
            key: &record_key,
            token: &token,
        };
        let run = held.while_running(route, lease, settings.hold).await;
        match run {
            Ok(response) => {
                let sealed_as = Sealed {
                    key: &seal_key,
                    record: &record_key,
                    fingerprint: &fingerprint,
                };
                keep(&settings, &held, &sealed_as, response).await
            }
            Err(panic) => {
                release(&claims, &record_key, &token).await;
                std::panic::resume_unwind(panic)
            }
        }
    }));
    match task.await {
        Ok(response) => response,
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        },
    }
}

/// Who the caller is, for keeping keys apart: the application's `scope_by` (also its
/// scope for the bound on new keys), else the person its access decision named.
fn caller_scope(settings: &Settings, parts: &Parts) -> (Option<String>, Option<String>) {
    match &settings.scope {
        Some(scope) => {
            let scope = scope(parts);
            (scope.clone(), scope)
        }
        None => {
            let access = parts
                .extensions
                .get::<Access>()
                .filter(|access| access.can_see())
                .map(|access| format!("access:{}", access.who()));
            (access, None)
        }
    }
}

async fn call<S>(inner: &mut S, request: Request) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    match inner.call(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// Keeps the first answer (or frees the key, for an answer the client should retry, or
/// one that cannot be kept) and answers it.
async fn keep(
    settings: &Settings,
    held: &Held<'_>,
    sealed_as: &Sealed<'_>,
    response: Response,
) -> Response {
    let (claims, record_key, token) = (held.claims, held.key, held.token);
    let status = response.status();
    let streamed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let retry_it = status.is_server_error()
        || status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_MANY_REQUESTS;
    // Too large to keep, as the body says before it is read: answered, not kept.
    let too_large = response.body().size_hint().lower() > settings.max_answer_bytes as u64;
    if too_large {
        tracing::warn!(
            max = settings.max_answer_bytes,
            "an answer under an Idempotency-Key is too large to keep; a retry runs again"
        );
    }
    if retry_it || streamed || too_large {
        release(claims, record_key, token).await;
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(body) = to_bytes(body, settings.max_answer_bytes).await else {
        // A body of unknown size that grew too large: it is gone with the error, so the
        // client gets a 500, and may retry.
        tracing::warn!(
            max = settings.max_answer_bytes,
            "an answer under an Idempotency-Key was too large to keep"
        );
        release(claims, record_key, token).await;
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let record = Record {
        status: parts.status,
        headers: parts.headers.clone(),
        body: body.clone(),
    };
    let Ok(sealed) = seal::seal(sealed_as, &record) else {
        tracing::error!("no randomness to seal an answer under an Idempotency-Key; not kept");
        release(claims, record_key, token).await;
        return Response::from_parts(parts, Body::from(body));
    };
    match claims
        .complete(record_key, token, &sealed, settings.ttl)
        .await
    {
        Ok(true) => {}
        Ok(false) => tracing::warn!(
            hold = ?settings.hold,
            "a request under an Idempotency-Key outlasted its hold; its answer was not kept"
        ),
        Err(error) => {
            tracing::warn!(%error, "the answer under an Idempotency-Key could not be kept")
        }
    }
    Response::from_parts(parts, Body::from(body))
}

async fn release(claims: &Claims, record_key: &str, token: &ClaimToken) {
    if let Err(error) = claims.release(record_key, token).await {
        tracing::warn!(%error, "an Idempotency-Key could not be freed; it frees itself when its hold ends");
    }
}

/// A kept answer, again, marked as such.
fn replay(sealed_as: &Sealed<'_>, outcome: &[u8]) -> Response {
    let Some(record) = seal::open(sealed_as, outcome) else {
        tracing::error!("a kept answer under an Idempotency-Key cannot be read");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let mut response = (record.status, record.body).into_response();
    *response.headers_mut() = record.headers;
    response
        .headers_mut()
        .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    response
}
