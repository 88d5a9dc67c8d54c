//! What a request brings to trace by: a W3C `traceparent` (with its `tracestate`) that
//! follows the rules, and an `x-request-id` of a safe shape. Anything else is ignored:
//! the layer then starts a fresh trace, and echoes no request id of the client's.

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use queue_core::trace::TraceContext;

/// The request header that carries (or receives) the request id.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The longest `x-request-id` taken.
pub const MAX_REQUEST_ID_LEN: usize = 64;

// Every request looks these up: named once here, a lookup hashes the name without
// parsing a string into a header name first.
static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
static TRACESTATE: HeaderName = HeaderName::from_static("tracestate");
/// [`REQUEST_ID_HEADER`] as a header name.
pub(crate) static REQUEST_ID: HeaderName = HeaderName::from_static(REQUEST_ID_HEADER);

fn header<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The trace context a request continues, if it brings a valid `traceparent`.
pub(crate) fn trace_context_of(headers: &HeaderMap) -> Option<TraceContext> {
    TraceContext::from_traceparent(header(headers, &TRACEPARENT)?, header(headers, &TRACESTATE))
}

/// The request's own `x-request-id`, if it has a shape safe to log and echo: 1 to 64
/// of `A-Z a-z 0-9 . _ -`. The header's own value, so that the echo copies nothing.
pub(crate) fn request_id_of(headers: &HeaderMap) -> Option<&HeaderValue> {
    headers.get(&REQUEST_ID).filter(|value| {
        let value = value.as_bytes();
        !value.is_empty()
            && value.len() <= MAX_REQUEST_ID_LEN
            && value
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::headers;

    #[test]
    fn a_valid_traceparent_is_continued_with_its_tracestate() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let ctx =
            trace_context_of(&headers(&[("traceparent", tp), ("tracestate", "k=v")])).unwrap();
        assert_eq!(ctx.traceparent(), tp);
        assert_eq!(ctx.tracestate(), Some("k=v"));
        assert_eq!(
            trace_context_of(&headers(&[("traceparent", "ff-garbage")])),
            None
        );
        assert_eq!(trace_context_of(&HeaderMap::new()), None);
    }

    #[test]
    fn request_ids_are_short_and_plain() {
        let id = |v: &str| {
            request_id_of(&headers(&[(REQUEST_ID_HEADER, v)]))
                .map(|value| value.to_str().unwrap().to_owned())
        };
        assert_eq!(
            id("28d770d8-1263-4aa2").as_deref(),
            Some("28d770d8-1263-4aa2")
        );
        for bad in ["deadbeef}:fake", "a b", &"a".repeat(65)] {
            assert_eq!(id(bad), None, "{bad}");
        }
        assert_eq!(request_id_of(&HeaderMap::new()), None);
    }
}
