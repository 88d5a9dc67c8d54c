//! `QueueError`: lets a handler use `?` on queue calls and answers for it.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

/// How long a client should wait before retrying when Redis is unreachable.
pub const RETRY_AFTER_SECONDS: u64 = 5;

/// A queue error as an HTTP answer: 503 with `Retry-After` when Redis is unreachable
/// (the request can be retried as is), 500 otherwise; both with a JSON body.
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
pub struct QueueError(pub queue_core::Error);

impl From<queue_core::Error> for QueueError {
    fn from(error: queue_core::Error) -> Self {
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

impl IntoResponse for QueueError {
    fn into_response(self) -> Response {
        let message = self.0.to_string();
        if self.0.is_unavailable() {
            tracing::error!(error = %message, "queue unavailable; answering 503");
            let mut response = (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(serde_json::json!({ "error": "queue unavailable", "message": message })),
            )
                .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
            response
        } else {
            tracing::error!(error = %message, "queue error; answering 500");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(serde_json::json!({ "error": "queue error", "message": message })),
            )
                .into_response()
        }
    }
}
