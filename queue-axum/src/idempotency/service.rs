//! One request through [`IdempotencyLayer`](super::IdempotencyLayer): its key and
//! fingerprint, the claim on the key, the route run to its end, and the answer kept or
//! the key freed.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::http::request::Parts;
use tokio::time::Instant;

use axum::body::{to_bytes, Body};
use axum::extract::{OriginalUri, Request};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::future::{BoxFuture, FutureExt};
use http_body::Body as _;
use queue_core::{claims::Claim, claims::ClaimToken, claims::Claims};
use tower::Service;

use super::key;
use super::record::Record;
use super::seal::{self, SealKey};
use super::settings::Settings;
use crate::access::Access;
use crate::carried::Carried;
use crate::error::QueueError;
use crate::rejection::{
    IdempotencyKeyInFlight, IdempotencyKeyReused, MissingIdempotencyKey, TooManyIdempotencyKeys,
};

/// How long a request holds its key at a time; extended while it runs.
const LEASE: Duration = Duration::from_secs(10);

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
    let scope = caller_scope(&settings, &parts);
    let names: [&[u8]; 4] = [
        scope.as_deref().unwrap_or_default().as_bytes(),
        parts.method.as_str().as_bytes(),
        path.as_bytes(),
        key.as_bytes(),
    ];
    let record_key = key::digest(&names);
    let seal_key = SealKey::derive(&names);
    let content_type = parts.headers.get(header::CONTENT_TYPE);
    let fingerprint = key::digest(&[
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
            return replay(&seal_key, &outcome)
        }
        Ok(_) => return IdempotencyKeyReused.into_response(),
        Err(e) => return QueueError(e).into_response(),
    };
    if let Some(refused) = over_bound(&settings, &claims, scope.as_deref(), &parts).await {
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
            Ok(response) => keep(&settings, &held, &seal_key, response).await,
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

/// Who the caller is, for keeping keys apart: the application's `scope_by`, else the
/// person its access decision named.
fn caller_scope(settings: &Settings, parts: &Parts) -> Option<String> {
    match &settings.scope {
        Some(scope) => scope(parts),
        None => parts
            .extensions
            .get::<Access>()
            .filter(|access| access.can_see())
            .map(|access| format!("access:{}", access.who())),
    }
}

/// The answer to a caller over its bound of new keys (429), or `None` within it. The
/// bucket is the caller's scope, else its address.
async fn over_bound(
    settings: &Settings,
    claims: &Claims,
    scope: Option<&str>,
    parts: &Parts,
) -> Option<Response> {
    let (max, window) = settings.new_keys?;
    let caller = match (scope, parts.extensions.get::<ConnectInfo<SocketAddr>>()) {
        (Some(scope), _) => format!("scope:{scope}"),
        (None, Some(ConnectInfo(peer))) => format!("peer:{}", peer.ip()),
        (None, None) => "anyone".to_owned(),
    };
    let bucket = format!("new-keys:{}", key::digest(&[caller.as_bytes()]));
    match claims.count(&bucket, window).await {
        Ok((n, _)) if n <= max => None,
        Ok((_, window_ends_within)) => {
            tracing::warn!(
                max,
                ?window,
                "a caller is over its bound of new Idempotency-Keys; answering 429 (behind a proxy, scope callers by their own address)"
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

/// A key this request holds.
struct Held<'a> {
    claims: &'a Claims,
    key: &'a str,
    token: &'a ClaimToken,
}

impl Held<'_> {
    /// Runs `work`, extending the hold by `lease` while it runs, until `hold` in all:
    /// a process that dies frees the key within a lease.
    async fn while_running<F: Future>(
        &self,
        work: F,
        lease: Duration,
        hold: Duration,
    ) -> F::Output {
        let started = Instant::now();
        let mut work = std::pin::pin!(work);
        let every = lease / 2;
        let mut extending = true;
        loop {
            tokio::select! {
                out = &mut work => return out,
                () = tokio::time::sleep(every), if extending => {
                    let left = hold.saturating_sub(started.elapsed());
                    let next = lease.min(left);
                    if next.is_zero() {
                        extending = false;
                        continue;
                    }
                    match self.claims.extend(self.key, self.token, next).await {
                        Ok(true) => {}
                        Ok(false) => {
                            tracing::warn!(?hold, "a request under an Idempotency-Key lost its hold; its answer will not be kept");
                            extending = false;
                        }
                        // The next tick tries again; the hold lasts a lease meanwhile.
                        Err(error) => tracing::debug!(%error, "an Idempotency-Key's hold could not be extended"),
                    }
                }
            }
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
    seal_key: &SealKey,
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
    let Ok(sealed) = seal::seal(seal_key, &record) else {
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
fn replay(seal_key: &SealKey, outcome: &[u8]) -> Response {
    let Some(record) = seal::open(seal_key, outcome) else {
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

#[cfg(test)]
mod tests {
    use queue_core::{app::Registrations, QueueApp};

    use super::*;

    #[tokio::test]
    async fn a_running_request_keeps_its_key_past_its_lease_until_its_hold() {
        let app = QueueApp::builder()
            .registrations(Registrations::None)
            .build_inline()
            .expect("an inline app");
        let claims = app.claims("held").expect("claims");
        let lease = Duration::from_millis(100);
        let claim = |key: &'static str| {
            let claims = claims.clone();
            async move { claims.claim(key, "tag", lease).await.expect("claim") }
        };
        let Claim::Taken(token) = claim("long").await else {
            panic!("the key is free")
        };
        let held = Held {
            claims: &claims,
            key: "long",
            token: &token,
        };
        let hold = Duration::from_secs(60);
        held.while_running(tokio::time::sleep(lease * 4), lease, hold)
            .await;
        assert!(
            matches!(claim("long").await, Claim::Held { .. }),
            "extended while it ran, four leases long"
        );

        // Past its hold, a request is no longer extended: the key frees itself.
        let Claim::Taken(token) = claim("capped").await else {
            panic!("the key is free")
        };
        let held = Held {
            claims: &claims,
            key: "capped",
            token: &token,
        };
        held.while_running(tokio::time::sleep(lease * 4), lease, lease * 2)
            .await;
        tokio::time::sleep(lease).await;
        assert!(matches!(claim("capped").await, Claim::Taken(_)));
    }
}
