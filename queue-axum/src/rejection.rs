//! Why an extractor refused a request: one type per failure, each with a fixed status
//! and a JSON body, under one `#[non_exhaustive]` enum. Like axum's rejections, each
//! implements `Display` and `Error` and tells its `status()` and `body_text()`. Every
//! rejection is logged at `debug` on target `queue_axum::rejection` (a client can send
//! many: a log line each at `warn` would be a lever on the logs).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// The methods and trait impls every rejection shares, from its status, its `error`
/// field and its message.
macro_rules! rejection {
    ($ty:ty, $status:expr, $error:literal, |$this:ident| $message:expr) => {
        rejection!($ty, $status, $error, |$this| $message, []);
    };
    ($ty:ty, $status:expr, $error:literal, |$this:ident| $message:expr, [$(($name:expr, $value:expr)),*]) => {
        impl $ty {
            /// The status it answers with.
            pub fn status(&self) -> StatusCode {
                $status
            }

            /// The `message` of its JSON body.
            pub fn body_text(&self) -> String {
                let $this = self;
                $message
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.body_text())
            }
        }

        impl std::error::Error for $ty {}

        impl IntoResponse for $ty {
            fn into_response(self) -> Response {
                let (status, message) = (self.status(), self.body_text());
                tracing::debug!(target: "queue_axum::rejection", status = status.as_u16(), error = $error, %message, "request rejected");
                let $this = &self;
                let _ = $this;
                let headers: Vec<(axum::http::HeaderName, String)> = vec![$(($name, $value.to_string())),*];
                (status, axum::response::AppendHeaders(headers), Json(serde_json::json!({ "error": $error, "message": message }))).into_response()
            }
        }
    };
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

rejection!(
    MissingQueueLayer,
    StatusCode::INTERNAL_SERVER_ERROR,
    "missing QueueLayer",
    |_r| MissingQueueLayer::MESSAGE.to_owned()
);

/// A queue handle could not be made (an invalid queue name in the code): 500.
#[derive(Debug)]
#[non_exhaustive]
pub struct InvalidQueue(pub queue_core::Error);

rejection!(
    InvalidQueue,
    StatusCode::INTERNAL_SERVER_ERROR,
    "invalid queue",
    |r| r.0.to_string()
);

/// The `Idempotency-Key` header is present but unusable: 400.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct InvalidIdempotencyKey;

rejection!(
    InvalidIdempotencyKey,
    StatusCode::BAD_REQUEST,
    "invalid Idempotency-Key",
    |_r| format!(
        "the Idempotency-Key header must be 1 to {} visible ASCII characters",
        crate::limits::MAX_IDEMPOTENCY_KEY_LEN
    )
);

/// A route behind [`IdempotencyLayer`](crate::IdempotencyLayer) that requires the
/// `Idempotency-Key` header got none: 400.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct MissingIdempotencyKey;

rejection!(
    MissingIdempotencyKey,
    StatusCode::BAD_REQUEST,
    "missing Idempotency-Key",
    |_r| {
        "this request must carry an Idempotency-Key header: a unique value (a UUID) per operation, the same on every retry".to_owned()
    }
);

/// The `Idempotency-Key` was used before with another request (another body, query or
/// content type) on the same route: 422. Nothing ran.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct IdempotencyKeyReused;

rejection!(
    IdempotencyKeyReused,
    StatusCode::UNPROCESSABLE_ENTITY,
    "Idempotency-Key reused",
    |_r| "this Idempotency-Key was used with another request; send a new key for a new operation"
        .to_owned()
);

/// A request with the same `Idempotency-Key` is still running: 409 with `Retry-After`,
/// the seconds until its hold ends at the latest (1 to 15; it may be retried sooner). Retried once it has
/// answered, this request gets its answer.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct IdempotencyKeyInFlight {
    /// When the running request's hold on the key ends at the latest.
    pub ends_within: std::time::Duration,
}

rejection!(
    IdempotencyKeyInFlight,
    StatusCode::CONFLICT,
    "request in progress",
    |_r| {
        "a request with this Idempotency-Key is still being processed; retry after the seconds Retry-After gives for its answer"
            .to_owned()
    },
    [(
        axum::http::header::RETRY_AFTER,
        whole_seconds(_r.ends_within)
    )]
);

/// The caller claimed more new `Idempotency-Key`s than the route allows in a window
/// ([`IdempotencyLayer::max_new_keys`](crate::IdempotencyLayer::max_new_keys)): 429
/// with `Retry-After`, the seconds until the window ends. Nothing ran, nothing is kept.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct TooManyIdempotencyKeys {
    /// When the caller's window ends.
    pub window_ends_within: std::time::Duration,
}

rejection!(
    TooManyIdempotencyKeys,
    StatusCode::TOO_MANY_REQUESTS,
    "too many Idempotency-Keys",
    |_r| {
        "this client sent more new Idempotency-Keys than allowed for now; retry after the seconds Retry-After gives"
        .to_owned()
    },
    [(
        axum::http::header::RETRY_AFTER,
        whole_seconds(_r.window_ends_within)
    )]
);

/// Whole seconds, rounded up, at least 1: what `Retry-After` carries.
fn whole_seconds(d: std::time::Duration) -> u64 {
    d.as_millis().div_ceil(1000).clamp(1, u128::from(u64::MAX)) as u64
}

/// Every way the extractors of this crate refuse a request.
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

impl QueueRejection {
    /// The status it answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            QueueRejection::MissingQueueLayer(r) => r.status(),
            QueueRejection::InvalidQueue(r) => r.status(),
            QueueRejection::InvalidIdempotencyKey(r) => r.status(),
        }
    }

    /// The `message` of its JSON body.
    pub fn body_text(&self) -> String {
        match self {
            QueueRejection::MissingQueueLayer(r) => r.body_text(),
            QueueRejection::InvalidQueue(r) => r.body_text(),
            QueueRejection::InvalidIdempotencyKey(r) => r.body_text(),
        }
    }
}

impl std::fmt::Display for QueueRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.body_text())
    }
}

impl std::error::Error for QueueRejection {}

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
