//! `Prefer: wait=N` (RFC 7240) on routes that answer [`Accepted`](crate::Accepted): the
//! request's job is awaited for a few seconds, and a job that finished in time is
//! answered with its status instead of the 202.

use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, Request, Response, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use futures::future::BoxFuture;
use queue_core::{JobOutcome, QueueApp};
use tower::{Layer, Service};

use crate::handover::AcceptedJob;
use crate::routes::{lookup, JobRoutes};

/// The `Preference-Applied` response header.
pub const PREFERENCE_APPLIED: &str = "preference-applied";

/// A layer that honours `Prefer: wait=N` on the routes it wraps: when a route answers
/// [`Accepted`](crate::Accepted), the job is awaited for up to `N` seconds (at most the
/// maximum set here). Finished in time (completed or failed for good), the answer is
/// the job's status as the [`JobRoutes`] given here would answer it (200 with
/// `Preference-Applied: wait=N`), or `303 See Other` to the 202's `Location` when set
/// so; otherwise the 202, unchanged. A client that goes away ends the wait at once.
/// The waited answer keeps what the handler gave the 202 besides the job: the fields
/// added with [`Accepted::with`](crate::Accepted::with) (where the status has no field
/// of that name) and its headers (`Cache-Control: no-store`, say). A 303 has no body:
/// prefer the 200 when the 202 carries something the client gets only once.
///
/// Requests without `Prefer: wait` pass through untouched. The layer reads the app
/// that [`QueueLayer`](crate::QueueLayer) puts in the request, so it goes inside it
/// (`.layer(PreferWaitLayer::..)` before `.layer(QueueLayer::new(&app))`); outside, a
/// request is answered as if it had not asked to wait. The waits of every request
/// share one reader of each queue's event stream (see
/// [`Queue::wait_for_job`](queue_core::Queue::wait_for_job)).
///
/// What the answer shows is the app's decision, as for the status route: by default
/// the state, progress and timestamps; the return value only with
/// [`JobRoutes::include_return_value`], so put a layer that shows it on routes behind
/// your own access check.
///
/// ```no_run
/// # async fn sign_up() -> queue_axum::Accepted { unimplemented!() }
/// # fn demo(app: queue_core::QueueApp) {
/// use std::time::Duration;
/// use axum::{routing::post, Router};
/// use queue_axum::{JobRoutes, PreferWaitLayer, QueueLayer};
///
/// let status = JobRoutes::new();
/// let router: Router = Router::new()
///     .route("/users", post(sign_up))
///     .layer(PreferWaitLayer::new(Duration::from_secs(10)).status(status.clone()))
///     .merge(status.router())
///     .layer(QueueLayer::new(&app));
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct PreferWaitLayer {
    max: Duration,
    status: JobRoutes,
    see_other: bool,
}

/// A layer's settings, shared by the services it made.
#[derive(Debug)]
struct Settings {
    status: JobRoutes,
    see_other: bool,
    max_seconds: u64,
}

impl PreferWaitLayer {
    /// Waits at most `max` (whole seconds; a longer `wait=N` is cut to it), answering
    /// with the status [`JobRoutes::new`] gives.
    pub fn new(max: Duration) -> Self {
        PreferWaitLayer {
            max,
            status: JobRoutes::new(),
            see_other: false,
        }
    }

    /// Answers a finished job as `status` would: its queues, and which of the
    /// payload, return value and failure reason it shows.
    pub fn status(mut self, status: JobRoutes) -> Self {
        self.status = status;
        self
    }

    /// Answers a finished job with `303 See Other` to the 202's `Location` (the
    /// client fetches the status itself) instead of the status.
    pub fn see_other(mut self, see_other: bool) -> Self {
        self.see_other = see_other;
        self
    }
}

impl<S> Layer<S> for PreferWaitLayer {
    type Service = PreferWaitService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        PreferWaitService {
            inner,
            settings: Arc::new(Settings {
                status: self.status.clone(),
                see_other: self.see_other,
                max_seconds: self.max.as_secs(),
            }),
        }
    }
}

/// The service [`PreferWaitLayer`] wraps around routes.
#[derive(Debug, Clone)]
pub struct PreferWaitService<S> {
    inner: S,
    settings: Arc<Settings>,
}

impl<S, ReqBody> Service<Request<ReqBody>> for PreferWaitService<S>
where
    S: Service<Request<ReqBody>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let asked = wait_preference(request.headers()).and_then(|seconds| {
            let Some(app) = request.extensions().get::<QueueApp>() else {
                tracing::debug!(
                    "Prefer: wait: no QueueLayer outside the PreferWaitLayer; not waiting"
                );
                return None;
            };
            Some((seconds.min(self.settings.max_seconds), app.clone()))
        });
        // Called here, not inside the response future: the service `poll_ready` made
        // ready handles the request itself, with no clone of it per request.
        let Some((seconds, app)) = asked else {
            return Box::pin(self.inner.call(request));
        };
        // The handler's `Accepted` leaves its job in the slot.
        let (slot, response) = AcceptedJob::handed_over_by(self.inner.call(request));
        let settings = self.settings.clone();
        Box::pin(async move {
            let response = response.await?;
            if response.status() != StatusCode::ACCEPTED {
                return Ok(response);
            }
            let job = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
            let Some(job) = job else {
                return Ok(response);
            };
            Ok(settings.answer(&app, &job, seconds, response).await)
        })
    }
}

impl Settings {
    /// The job's status if it finished within `seconds`, else `accepted`.
    async fn answer(
        &self,
        app: &QueueApp,
        job: &AcceptedJob,
        seconds: u64,
        accepted: Response<Body>,
    ) -> Response<Body> {
        // A job the status route would not show is not shown here either.
        let Ok(queue) = app.queue::<()>(&job.queue) else {
            return accepted;
        };
        if !self.status.serves(app, &job.queue) {
            return accepted;
        }
        let outcome = queue
            .wait_for_job(&job.id, Duration::from_secs(seconds))
            .await;
        match outcome {
            Ok(outcome) if outcome.is_finished() => {}
            Ok(JobOutcome::TimedOut) => {
                tracing::debug!(queue = %job.queue, job_id = %job.id, seconds, "Prefer: wait: not finished in time; answering 202");
                return accepted;
            }
            Ok(_) => return accepted,
            Err(e) => {
                tracing::debug!(queue = %job.queue, job_id = %job.id, error = %e, "Prefer: wait: cannot wait; answering 202");
                return accepted;
            }
        }
        let (parts, accepted_body) = accepted.into_parts();
        let location = parts.headers.get(header::LOCATION).cloned();
        let mut response = if self.see_other {
            if location.is_none() {
                return Response::from_parts(parts, accepted_body);
            }
            StatusCode::SEE_OTHER.into_response()
        } else {
            match lookup(app, &job.queue, &job.id, &self.status).await {
                Ok(Some(status)) => Json(with_fields(status, &job.extra)).into_response(),
                _ => return Response::from_parts(parts, accepted_body),
            }
        };
        // The handler's headers stay (`Cache-Control: no-store` on an answer that
        // carries a token, say); the body's own are the new body's.
        let own = [header::CONTENT_TYPE, header::CONTENT_LENGTH];
        for (name, value) in &parts.headers {
            // A 303 keeps the `Location`; a 200 names it as `Content-Location` below.
            let replaced = own.contains(name) || (name == header::LOCATION && !self.see_other);
            if !replaced {
                response.headers_mut().append(name.clone(), value.clone());
            }
        }
        let headers = response.headers_mut();
        if let Ok(applied) = HeaderValue::from_str(&format!("wait={seconds}")) {
            headers.insert(PREFERENCE_APPLIED, applied);
        }
        if let (false, Some(location)) = (self.see_other, location) {
            // The body is the representation of the status route's resource.
            headers.insert(header::CONTENT_LOCATION, location);
        }
        headers.insert(header::VARY, HeaderValue::from_static("prefer"));
        response
    }
}

/// The status, with the fields the handler added to its 202 (`Accepted::with`) where
/// the status has none of that name: what the client would have had from the 202
/// (an id it needs, a token shown once) stays in the answer.
fn with_fields(
    status: crate::routes::JobStatus,
    extra: &serde_json::Map<String, serde_json::Value>,
) -> serde_json::Value {
    let mut body = serde_json::to_value(status).unwrap_or(serde_json::Value::Null);
    if let serde_json::Value::Object(fields) = &mut body {
        for (key, value) in extra {
            fields.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    body
}

/// The `wait` preference's seconds (RFC 7240: the first one given counts; names are
/// case-insensitive, values may be quoted, parameters after `;` are ignored).
fn wait_preference(headers: &HeaderMap) -> Option<u64> {
    headers
        .get_all("prefer")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .find_map(|preference| {
            let token = preference.split(';').next()?.trim();
            let (name, value) = token.split_once('=')?;
            if !name.trim().eq_ignore_ascii_case("wait") {
                return None;
            }
            Some(value.trim().trim_matches('"').parse::<u64>().ok())
        })
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::wait_preference;
    use crate::test_support::headers;

    #[test]
    fn the_wait_preference_is_read_as_rfc_7240_writes_it() {
        let wait = |value: &str| wait_preference(&headers(&[("prefer", value)]));
        assert_eq!(wait("wait=5"), Some(5));
        assert_eq!(wait("respond-async, wait=10"), Some(10));
        assert_eq!(wait("WAIT = \"3\"; foo"), Some(3));
        assert_eq!(wait("wait=5, wait=9"), Some(5), "the first counts");
        assert_eq!(wait("wait=soon"), None);
        assert_eq!(wait("return=minimal"), None);
        assert_eq!(wait_preference(&headers(&[])), None);
    }
}
