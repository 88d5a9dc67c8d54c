//! `Accepted`: the 202 answer to "I queued your work", with where to look.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use queue_core::AddedJob;
use serde::Serialize;

/// The default path prefix of the status route ([`job_routes`](crate::job_routes)).
pub const DEFAULT_STATUS_PREFIX: &str = "/jobs";

/// 202 Accepted with `{"queue", "jobId", "state", "duplicate"}` and a `Location` header
/// pointing at the job's status route. A duplicate job id is still a 202: the client
/// retried, and the job it asked for exists.
///
/// ```
/// use queue_axum::Accepted;
/// # fn demo(job: queue_core::AddedJob) -> Accepted {
/// Accepted::from(job).with("userId", 42)
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Accepted {
    body: serde_json::Map<String, serde_json::Value>,
    queue: String,
    id: String,
    status_prefix: String,
}

impl From<AddedJob> for Accepted {
    fn from(job: AddedJob) -> Self {
        Accepted::new(&job)
    }
}

impl Accepted {
    /// The answer for `job`.
    pub fn new(job: &AddedJob) -> Self {
        let mut body = serde_json::Map::new();
        body.insert("queue".into(), job.queue.clone().into());
        body.insert("jobId".into(), job.id.clone().into());
        body.insert(
            "state".into(),
            job.state
                .map_or(serde_json::Value::Null, |s| s.as_str().into()),
        );
        body.insert("duplicate".into(), job.duplicate.into());
        Accepted {
            body,
            queue: job.queue.clone(),
            id: job.id.clone(),
            status_prefix: DEFAULT_STATUS_PREFIX.to_owned(),
        }
    }

    /// Adds a field to the JSON body (e.g. the id of what the request created).
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        let value = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
        self.body.insert(key.to_owned(), value);
        self
    }

    /// Where the status routes are mounted, when not at `/jobs`.
    pub fn status_prefix(mut self, prefix: &str) -> Self {
        self.status_prefix = prefix.trim_end_matches('/').to_owned();
        self
    }

    /// The `Location` this answer points at.
    pub fn location(&self) -> String {
        format!(
            "{}/{}/{}",
            self.status_prefix,
            encode_segment(&self.queue),
            encode_segment(&self.id)
        )
    }
}

impl IntoResponse for Accepted {
    fn into_response(self) -> Response {
        let location = self.location();
        let mut response = (
            StatusCode::ACCEPTED,
            Json(serde_json::Value::Object(self.body)),
        )
            .into_response();
        if let Ok(value) = HeaderValue::from_str(&location) {
            response.headers_mut().insert(header::LOCATION, value);
        }
        response
    }
}

/// Percent-encodes everything but unreserved characters, so any id fits in a path.
fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::encode_segment;

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(encode_segment("welcome-42"), "welcome-42");
        assert_eq!(encode_segment("a b/ü"), "a%20b%2F%C3%BC");
    }
}
