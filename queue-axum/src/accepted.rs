//! `Accepted`: the 202 answer to "I queued your work", with where to look.

use std::borrow::Cow;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use queue_core::{flow::AddedFlow, AddedJob};
use serde::Serialize;

use crate::handover::AcceptedJob;

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
    queue: String,
    id: String,
    state: Option<&'static str>,
    duplicate: bool,
    /// Fields added with [`Accepted::with`]; they replace a base field of the same name.
    extra: serde_json::Map<String, serde_json::Value>,
    status_prefix: Cow<'static, str>,
    /// Set with [`Accepted::location_at`]; else the job's status route.
    location: Option<String>,
}

impl From<AddedJob> for Accepted {
    fn from(job: AddedJob) -> Self {
        Accepted {
            state: job.state.map(|s| s.as_str()),
            duplicate: job.duplicate,
            queue: job.queue,
            id: job.id,
            extra: serde_json::Map::new(),
            status_prefix: Cow::Borrowed(DEFAULT_STATUS_PREFIX),
            location: None,
        }
    }
}

/// The answer for a flow: its root job, with every job of the flow in `jobs`
/// (`{queue, jobId, state}`, the root first, depth first).
impl From<AddedFlow> for Accepted {
    fn from(flow: AddedFlow) -> Self {
        let jobs: Vec<serde_json::Value> = flow
            .jobs()
            .iter()
            .map(|job| {
                serde_json::json!({
                    "queue": job.queue,
                    "jobId": job.id,
                    "state": job.state.map(|s| s.as_str()),
                })
            })
            .collect();
        Accepted::from(flow.job).with("jobs", jobs)
    }
}

impl Accepted {
    /// The answer for `job`.
    pub fn new(job: &AddedJob) -> Self {
        Accepted::from(job.clone())
    }

    /// Adds a field to the JSON body (e.g. the id of what the request created).
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        let value = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
        self.extra.insert(key.to_owned(), value);
        self
    }

    /// Points `Location` at `path` (an application's own status page for the work, such
    /// as `/reports/2026-11`) instead of the job's status route.
    pub fn location_at(mut self, path: impl Into<String>) -> Self {
        self.location = Some(path.into());
        self
    }

    /// Where the status routes are mounted, when not at `/jobs`.
    pub fn status_prefix(mut self, prefix: &str) -> Self {
        self.status_prefix = Cow::Owned(prefix.trim_end_matches('/').to_owned());
        self
    }

    /// The `Location` this answer points at.
    pub fn location(&self) -> String {
        if let Some(location) = &self.location {
            return location.clone();
        }
        let mut out =
            String::with_capacity(self.status_prefix.len() + self.queue.len() + self.id.len() + 2);
        out.push_str(&self.status_prefix);
        out.push('/');
        encode_segment(&mut out, &self.queue);
        out.push('/');
        encode_segment(&mut out, &self.id);
        out
    }

    /// The JSON body: `duplicate`, `jobId`, `queue`, `state` (in key order), with the
    /// fields added by [`Accepted::with`] merged in.
    fn body(&self) -> Vec<u8> {
        let base = BaseBody {
            duplicate: self.duplicate,
            job_id: &self.id,
            queue: &self.queue,
            state: self.state,
        };
        let json = if self.extra.is_empty() {
            if let Some(body) = base.written_out() {
                return body;
            }
            serde_json::to_vec(&base)
        } else {
            serde_json::to_value(&base).and_then(|mut body| {
                if let serde_json::Value::Object(fields) = &mut body {
                    fields.extend(self.extra.clone());
                }
                serde_json::to_vec(&body)
            })
        };
        // Strings, booleans and JSON values: serializing cannot fail.
        json.unwrap_or_default()
    }
}

/// The fields every 202 carries.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BaseBody<'a> {
    duplicate: bool,
    job_id: &'a str,
    queue: &'a str,
    state: Option<&'a str>,
}

impl BaseBody<'_> {
    /// The body as `serde_json` writes it, written out into a buffer of its exact size
    /// when no string needs escaping (job ids and queue names nearly never do): every
    /// 202 without fields of [`Accepted::with`] is answered with it, and a buffer of
    /// the exact size becomes the response body without another allocation. `None`
    /// when a string needs escaping.
    fn written_out(&self) -> Option<Vec<u8>> {
        // What JSON escapes: quotes, backslashes and control characters.
        let verbatim = |s: &str| s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\');
        let state = self.state.unwrap_or("");
        if !(verbatim(self.job_id) && verbatim(self.queue) && verbatim(state)) {
            return None;
        }
        let duplicate = if self.duplicate { "true" } else { "false" };
        let parts: [&str; 9] = [
            r#"{"duplicate":"#,
            duplicate,
            r#","jobId":""#,
            self.job_id,
            r#"","queue":""#,
            self.queue,
            r#"","state":"#,
            if self.state.is_some() { "\"" } else { "null" },
            state,
        ];
        let tail = if self.state.is_some() { "\"}" } else { "}" };
        let len = parts.iter().map(|p| p.len()).sum::<usize>() + tail.len();
        let mut out = Vec::with_capacity(len);
        for part in parts.into_iter().chain([tail]) {
            out.extend_from_slice(part.as_bytes());
        }
        Some(out)
    }
}

impl IntoResponse for Accepted {
    fn into_response(self) -> Response {
        // Built in place rather than from a (status, headers, body) tuple: a byte body's
        // own conversion sets `content-type: application/octet-stream`, which the tuple
        // then replaces, and the two conversions between move the response twice.
        let mut response = Response::new(Body::from(self.body()));
        *response.status_mut() = StatusCode::ACCEPTED;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        // The path's own buffer becomes the header: no copy of it.
        if let Ok(value) = HeaderValue::from_maybe_shared(Bytes::from(self.location())) {
            headers.insert(header::LOCATION, value);
        }
        AcceptedJob::hand_over(|| AcceptedJob {
            queue: self.queue,
            id: self.id,
            extra: self.extra,
        });
        response
    }
}

/// The bytes a path segment keeps as they are: RFC 3986's unreserved characters.
static UNRESERVED: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        let b = byte as u8;
        table[byte] = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
        byte += 1;
    }
    table
};

/// Appends `segment` to `out`, percent-encoding everything but unreserved characters, so
/// any id fits in a path.
fn encode_segment(out: &mut String, segment: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let unreserved = |byte: u8| UNRESERVED[usize::from(byte)];
    // Runs of unreserved characters are copied whole: an id is nearly always one run.
    let mut run_start = 0;
    for (i, byte) in segment.bytes().enumerate() {
        if unreserved(byte) {
            continue;
        }
        // A run is ASCII, so it starts and ends on character boundaries; an empty one
        // may sit inside a character (between two encoded bytes of it).
        out.push_str(segment.get(run_start..i).unwrap_or_default());
        out.push('%');
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0xf)]));
        run_start = i + 1;
    }
    out.push_str(segment.get(run_start..).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_has_the_base_fields_and_the_added_ones() {
        let job = Accepted {
            queue: "email".into(),
            id: "welcome-1".into(),
            state: Some("waiting"),
            duplicate: false,
            extra: serde_json::Map::new(),
            status_prefix: Cow::Borrowed(DEFAULT_STATUS_PREFIX),
            location: None,
        };
        assert_eq!(job.location(), "/jobs/email/welcome-1");
        assert_eq!(
            job.clone().location_at("/reports/2026-11").location(),
            "/reports/2026-11"
        );
        let plain: serde_json::Value = serde_json::from_slice(&job.body()).unwrap();
        assert_eq!(
            plain,
            serde_json::json!({"duplicate": false, "jobId": "welcome-1", "queue": "email", "state": "waiting"})
        );
        let with: serde_json::Value =
            serde_json::from_slice(&job.with("userId", 7).with("state", "x").body()).unwrap();
        assert_eq!(with["userId"], 7);
        assert_eq!(with["state"], "x", "an added field replaces a base one");
        assert_eq!(with["jobId"], "welcome-1");
    }

    #[tokio::test]
    async fn the_response_is_a_202_of_json_with_its_location() {
        let job = Accepted {
            queue: "email".into(),
            id: "welcome 1".into(),
            state: Some("waiting"),
            duplicate: true,
            extra: serde_json::Map::new(),
            status_prefix: Cow::Borrowed(DEFAULT_STATUS_PREFIX),
            location: None,
        };
        let body = job.body();
        let response = job.into_response();
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        let headers = response.headers();
        // One content type, JSON's: not a byte body's default beside it.
        let types: Vec<_> = headers.get_all(header::CONTENT_TYPE).iter().collect();
        assert_eq!(types, ["application/json"]);
        assert_eq!(headers[header::LOCATION], "/jobs/email/welcome%201");
        assert_eq!(headers.len(), 2);
        let sent = axum::body::to_bytes(response.into_body(), 1024).await;
        assert_eq!(sent.unwrap(), body);
    }

    #[test]
    fn the_written_out_body_is_what_serde_json_writes() {
        let cases = [
            ("email", "welcome-1", Some("waiting"), false),
            ("email", "42", None, true),
            ("e\u{fc}mail", "a b/\u{fc}~", Some("prioritized"), false),
        ];
        for (queue, job_id, state, duplicate) in cases {
            let base = BaseBody {
                duplicate,
                job_id,
                queue,
                state,
            };
            let written = base.written_out().expect("nothing to escape");
            assert_eq!(written, serde_json::to_vec(&base).unwrap(), "{job_id}");
            assert_eq!(written.len(), written.capacity());
        }
        for job_id in ["say \"hi\"", "back\\slash", "line\nbreak"] {
            let base = BaseBody {
                duplicate: false,
                job_id,
                queue: "email",
                state: Some("waiting"),
            };
            assert_eq!(base.written_out(), None, "{job_id}");
            let job = Accepted {
                queue: "email".into(),
                id: job_id.into(),
                state: Some("waiting"),
                duplicate: false,
                extra: serde_json::Map::new(),
                status_prefix: Cow::Borrowed(DEFAULT_STATUS_PREFIX),
                location: None,
            };
            let body: serde_json::Value = serde_json::from_slice(&job.body()).unwrap();
            assert_eq!(body["jobId"], job_id);
        }
    }

    #[test]
    fn path_segments_are_encoded() {
        let encoded = |segment: &str| {
            let mut out = String::new();
            encode_segment(&mut out, segment);
            out
        };
        assert_eq!(encoded("welcome-42"), "welcome-42");
        assert_eq!(encoded("a b/ü"), "a%20b%2F%C3%BC");
        assert_eq!(encoded("üü"), "%C3%BC%C3%BC");
        assert_eq!(encoded("ü-1"), "%C3%BC-1");
        assert_eq!(encoded(""), "");
    }
}
