//! `ApiError`: every way a request fails, as a status and a JSON body naming the field.

use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use queue_axum::QueueError;

/// A request that could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body is not JSON (or too large, or not UTF-8): the status says which.
    #[error("{message}")]
    Body {
        /// 400, 413 or 415.
        status: StatusCode,
        /// What was wrong.
        message: String,
    },
    /// A field is missing or invalid: 422.
    #[error("{field}: {message}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The thing exists already: 409.
    #[error("{0}")]
    Conflict(String),
    /// No such thing: 404.
    #[error("{0}")]
    NotFound(String),
    /// No credential, or the wrong one: 401.
    #[error("{0}")]
    Unauthorized(String),
    /// Not allowed at all: 403.
    #[error("{0}")]
    Forbidden(String),
    /// Too many wrong credentials from this client: 429 with `Retry-After`.
    #[error("too many wrong credentials; retry after {0:?}")]
    TooManyFailures(std::time::Duration),
    /// The database failed: 500.
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    /// The queue failed: 503 or 500.
    #[error(transparent)]
    Queue(#[from] QueueError),
}

impl From<queue_core::Error> for ApiError {
    fn from(e: queue_core::Error) -> Self {
        ApiError::Queue(QueueError(e))
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        ApiError::Body {
            status: rejection.status(),
            message: bounded(rejection.body_text()),
        }
    }
}

/// The most of a message an answer carries: the messages here quote what the client
/// sent through `queue_axum::quote`, and this bounds the rest (a serde error quoting a
/// value, say).
const MAX_MESSAGE_BYTES: usize = 512;

/// `message`, cut at [`MAX_MESSAGE_BYTES`] (on a character boundary) with `…`.
fn bounded(mut message: String) -> String {
    if message.len() > MAX_MESSAGE_BYTES {
        let mut end = MAX_MESSAGE_BYTES;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

impl ApiError {
    /// The same error, its message bounded.
    fn bounded(self) -> Self {
        match self {
            ApiError::Body { status, message } => ApiError::Body {
                status,
                message: bounded(message),
            },
            ApiError::Invalid { field, message } => ApiError::Invalid {
                field,
                message: bounded(message),
            },
            ApiError::Conflict(m) => ApiError::Conflict(bounded(m)),
            ApiError::NotFound(m) => ApiError::NotFound(bounded(m)),
            other => other,
        }
    }

    pub(crate) fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        ApiError::Invalid {
            field,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, body) = match self.bounded() {
            ApiError::Queue(e) => return e.into_response(),
            ApiError::Body { status, message } => (
                status,
                serde_json::json!({"error": "bad body", "message": message}),
            ),
            ApiError::Invalid { field, message } => (
                StatusCode::UNPROCESSABLE_ENTITY,
                serde_json::json!({"error": "invalid field", "field": field, "message": message}),
            ),
            ApiError::Conflict(message) => (
                StatusCode::CONFLICT,
                serde_json::json!({"error": "conflict", "message": message}),
            ),
            ApiError::NotFound(message) => (
                StatusCode::NOT_FOUND,
                serde_json::json!({"error": "not found", "message": message}),
            ),
            ApiError::Unauthorized(message) => {
                let body = serde_json::json!({"error": "unauthorized", "message": message});
                return (
                    StatusCode::UNAUTHORIZED,
                    [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
                    Json(body),
                )
                    .into_response();
            }
            ApiError::Forbidden(message) => (
                StatusCode::FORBIDDEN,
                serde_json::json!({"error": "forbidden", "message": message}),
            ),
            ApiError::TooManyFailures(after) => {
                let seconds = after.as_secs().max(1).to_string();
                let body = serde_json::json!({
                    "error": "too many wrong credentials",
                    "message": "this address sent too many wrong tokens; retry after the seconds Retry-After gives",
                });
                return (
                    StatusCode::TOO_MANY_REQUESTS,
                    [(axum::http::header::RETRY_AFTER, seconds)],
                    Json(body),
                )
                    .into_response();
            }
            ApiError::Db(e) => {
                tracing::error!(error = %e, "database error");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    serde_json::json!({"error": "database error"}),
                )
            }
        };
        (status, Json(body)).into_response()
    }
}
