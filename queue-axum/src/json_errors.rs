//! Error answers as JSON everywhere: axum's own (an unknown route, a wrong method, a
//! path or body its extractors refuse) are plain text or empty; this turns them into
//! `{"error", "message"}` like every other answer.

use axum::body::{to_bytes, Body};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;

/// The most of a plain error body that is kept as the message.
const MAX_MESSAGE_BYTES: usize = 4096;

/// Rewrites a 4xx or 5xx answer that is not JSON into `{"error": "<reason>",
/// "message": "<its text>"}`, keeping its status and headers. Use it on the whole
/// router:
///
/// ```
/// use axum::{middleware, Router};
///
/// let router: Router = Router::new().layer(middleware::map_response(queue_axum::json_errors));
/// ```
pub async fn json_errors(response: Response) -> Response {
    let status = response.status();
    // JSON is already JSON; an HTML page (the dashboard's) is an answer meant for a
    // person, and stays one.
    let kept = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/html"));
    if !(status.is_client_error() || status.is_server_error()) || kept {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = match to_bytes(body, MAX_MESSAGE_BYTES).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    let reason = status.canonical_reason().unwrap_or("error").to_lowercase();
    let message = if text.is_empty() {
        reason.clone()
    } else {
        text
    };
    let json = Json(serde_json::json!({ "error": reason, "message": message })).into_response();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let (_, body): (_, Body) = json.into_parts();
    Response::from_parts(parts, body)
}
