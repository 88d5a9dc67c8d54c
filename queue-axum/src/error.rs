//! `QueueError`: lets a handler use `?` on queue calls and answers for it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use queue_core::{flow::FlowError, Error};

/// How long a client should wait before retrying when Redis is unreachable.
pub const RETRY_AFTER_SECONDS: u64 = 5;

/// An outage is logged at `warn` at most once per this many seconds; the other
/// requests it fails log at `debug`.
const OUTAGE_LOG_EVERY_SECS: u64 = 10;

/// A queue error as an HTTP answer, always with a JSON body:
/// - 503 with `Retry-After` when Redis (or the database) is unreachable: the request
///   can be retried as is;
/// - 4xx when the request caused it: an option built from its input that BullMQ refuses
///   (422, e.g. a `:` in a job id), a payload over the limit (413), a job that does not
///   exist (404) or is in the wrong state (409), a flow that names an existing job it
///   cannot take in (409), with the refusal's own text;
/// - 500 otherwise, with no internals in the body (they are logged).
///
/// ```
/// use queue_axum::{Accepted, QueueError, Queues};
/// use queue_core::JobOptions;
///
/// async fn enqueue(Queues(app): Queues) -> Result<Accepted, QueueError> {
///     let job = app.queue::<u32>("numbers")?.add("n", 7, JobOptions::new()).await?;
///     Ok(job.into())
/// }
/// ```
#[derive(Debug)]
pub struct QueueError(pub Error);

impl From<Error> for QueueError {
    fn from(error: Error) -> Self {
        QueueError(error)
    }
}

impl std::fmt::Display for QueueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for QueueError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl QueueError {
    /// The status this error answers with.
    pub fn status(&self) -> StatusCode {
        match &self.0 {
            e if e.is_unavailable() => StatusCode::SERVICE_UNAVAILABLE,
            Error::WorkerClosed { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Error::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Error::Locked { .. } => StatusCode::CONFLICT,
            Error::InvalidOption {
                option: "payload", ..
            } => StatusCode::PAYLOAD_TOO_LARGE,
            Error::InvalidOption { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Error::JobNotFound { .. } => StatusCode::NOT_FOUND,
            Error::WrongState { .. } => StatusCode::CONFLICT,
            // A flow naming one job twice is the request's own mistake; one naming a
            // job that exists and cannot be its job conflicts with what is stored.
            Error::Flow(FlowError::RepeatedId { .. }) => StatusCode::UNPROCESSABLE_ENTITY,
            Error::Flow(_) => StatusCode::CONFLICT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The `error` field of the body.
    fn kind(&self) -> &'static str {
        match self.status() {
            StatusCode::SERVICE_UNAVAILABLE => "queue unavailable",
            StatusCode::PAYLOAD_TOO_LARGE => "payload too large",
            StatusCode::UNPROCESSABLE_ENTITY => "invalid job option",
            StatusCode::NOT_FOUND => "job not found",
            StatusCode::CONFLICT => "job in the wrong state",
            StatusCode::TOO_MANY_REQUESTS => "rate limited",
            _ => "internal error",
        }
    }

    /// The `message` of the body: the refusal's text for what the client caused, and
    /// nothing from our internals.
    pub fn body_text(&self) -> String {
        match self.status() {
            StatusCode::SERVICE_UNAVAILABLE => {
                "the job queue is unavailable; retry after a few seconds".to_owned()
            }
            StatusCode::INTERNAL_SERVER_ERROR => "the request could not be served".to_owned(),
            _ => self.0.to_string(),
        }
    }
}

/// Whether this outage report is the first in a while (and is logged at `warn`).
fn first_in_a_while() -> bool {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let last = LAST.load(Ordering::Relaxed);
    now >= last + OUTAGE_LOG_EVERY_SECS
        && LAST
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

impl IntoResponse for QueueError {
    fn into_response(self) -> Response {
        let status = self.status();
        let error = self.0.to_string();
        match status {
            StatusCode::SERVICE_UNAVAILABLE if first_in_a_while() => tracing::warn!(
                %error,
                "queue unavailable; answering 503 (repeats within {OUTAGE_LOG_EVERY_SECS} s log at debug)"
            ),
            StatusCode::SERVICE_UNAVAILABLE => {
                tracing::debug!(%error, "queue unavailable; answering 503")
            }
            StatusCode::INTERNAL_SERVER_ERROR => {
                tracing::error!(%error, "queue error; answering 500")
            }
            _ => tracing::debug!(%error, status = status.as_u16(), "request refused by the queue"),
        }
        let body = Json(serde_json::json!({ "error": self.kind(), "message": self.body_text() }));
        let retry_after = match &self.0 {
            Error::RateLimited { retry_after, .. } | Error::RedisMemoryHigh { retry_after, .. } => {
                Some(retry_after.as_secs_f64().ceil() as u64)
            }
            _ => (status == StatusCode::SERVICE_UNAVAILABLE).then_some(RETRY_AFTER_SECONDS),
        };
        let mut response = (status, body).into_response();
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(e: Error) -> (StatusCode, String) {
        let e = QueueError(e);
        (e.status(), e.body_text())
    }

    #[test]
    fn client_mistakes_are_4xx_and_internals_stay_out_of_the_body() {
        let bad_id = queue_core::JobOptions::new()
            .job_id("a:b")
            .validate()
            .unwrap_err();
        let (status, text) = answer(bad_id);
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(text.contains("a-b"), "says how to fix it: {text}");
        let (status, _) = answer(Error::JobNotFound {
            queue: "q".into(),
            id: "x".into(),
        });
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, text) = answer(Error::Script {
            code: -1,
            message: "Missing key for job 7 at bull:q:7".into(),
        });
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!text.contains("bull:q"), "{text}");
        let (status, text) = answer(Error::Timeout {
            what: "add",
            after: std::time::Duration::from_secs(3),
        });
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(text.contains("retry"), "{text}");
        let (status, text) = answer(Error::Flow(FlowError::Contended { tries: 10 }));
        assert_eq!(status, StatusCode::CONFLICT);
        assert!(text.contains("try again"), "{text}");
    }
}
