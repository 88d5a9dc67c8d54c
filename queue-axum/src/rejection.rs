//! Why an extractor refused a request: one type per failure, each with a fixed status
//! and a JSON body, under one `#[non_exhaustive]` enum. Every rejection is logged on
//! target `queue_axum::rejection`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

fn respond(status: StatusCode, error: &str, message: String) -> Response {
    tracing::warn!(target: "queue_axum::rejection", status = status.as_u16(), error, %message, "request rejected");
    (
        status,
        Json(serde_json::json!({ "error": error, "message": message })),
    )
        .into_response()
}

/// The router has no [`QueueLayer`](crate::QueueLayer): a set-up mistake, answered 500.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct MissingQueueLayer;

impl MissingQueueLayer {
    /// What the response body says.
    pub const MESSAGE: &'static str =
        "no QueueApp in request extensions: add `.layer(QueueLayer::new(&app))` to the router";
}

impl IntoResponse for MissingQueueLayer {
    fn into_response(self) -> Response {
        respond(
            StatusCode::INTERNAL_SERVER_ERROR,
            "missing QueueLayer",
            Self::MESSAGE.to_owned(),
        )
    }
}

/// A queue handle could not be made (an invalid queue name in the code): 500.
#[derive(Debug)]
#[non_exhaustive]
pub struct InvalidQueue(pub queue_core::Error);

impl IntoResponse for InvalidQueue {
    fn into_response(self) -> Response {
        respond(
            StatusCode::INTERNAL_SERVER_ERROR,
            "invalid queue",
            self.0.to_string(),
        )
    }
}

/// The `Idempotency-Key` header is empty or not text: 400.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct InvalidIdempotencyKey;

impl IntoResponse for InvalidIdempotencyKey {
    fn into_response(self) -> Response {
        respond(
            StatusCode::BAD_REQUEST,
            "invalid Idempotency-Key",
            "the Idempotency-Key header must be non-empty visible ASCII".to_owned(),
        )
    }
}

/// Every way this crate's extractors refuse a request.
#[derive(Debug)]
#[non_exhaustive]
pub enum QueueRejection {
    /// See [`MissingQueueLayer`].
    MissingQueueLayer(MissingQueueLayer),
    /// See [`InvalidQueue`].
    InvalidQueue(InvalidQueue),
    /// See [`InvalidIdempotencyKey`].
    InvalidIdempotencyKey(InvalidIdempotencyKey),
}

impl IntoResponse for QueueRejection {
    fn into_response(self) -> Response {
        match self {
            QueueRejection::MissingQueueLayer(r) => r.into_response(),
            QueueRejection::InvalidQueue(r) => r.into_response(),
            QueueRejection::InvalidIdempotencyKey(r) => r.into_response(),
        }
    }
}

impl From<MissingQueueLayer> for QueueRejection {
    fn from(r: MissingQueueLayer) -> Self {
        QueueRejection::MissingQueueLayer(r)
    }
}

impl From<InvalidQueue> for QueueRejection {
    fn from(r: InvalidQueue) -> Self {
        QueueRejection::InvalidQueue(r)
    }
}

impl From<InvalidIdempotencyKey> for QueueRejection {
    fn from(r: InvalidIdempotencyKey) -> Self {
        QueueRejection::InvalidIdempotencyKey(r)
    }
}
