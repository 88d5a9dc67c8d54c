//! Where a request's trace id comes from: a W3C `traceparent` header that follows the
//! rules, else an `x-request-id` of a safe shape. Anything else is ignored, and the
//! layer starts a fresh trace instead.

use axum::http::HeaderMap;

/// The request header that carries (or receives) the request id.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The longest `x-request-id` taken.
pub const MAX_REQUEST_ID_LEN: usize = 64;

/// The trace id of a `traceparent` value, by the W3C Trace Context rules: lower-case
/// hex fields `version-traceid-parentid-flags`; version `ff` is invalid; version `00`
/// has exactly these four fields, later versions may append more; neither id may be all
/// zeros.
pub(crate) fn traceparent_trace_id(value: &str) -> Option<&str> {
    let lower_hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let not_zero = |s: &str| s.bytes().any(|b| b != b'0');
    let mut fields = value.trim().splitn(5, '-');
    let (version, trace, parent, flags) = (
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
    );
    let rest = fields.next();
    let valid = lower_hex(version, 2)
        && version != "ff"
        && lower_hex(trace, 32)
        && not_zero(trace)
        && lower_hex(parent, 16)
        && not_zero(parent)
        && lower_hex(flags, 2)
        && (rest.is_none() || version != "00");
    valid.then_some(trace)
}

/// An `x-request-id` of a shape safe to log and store: 1 to 64 of `A-Z a-z 0-9 . _ -`.
pub(crate) fn request_id(value: &str) -> Option<&str> {
    let ok = !value.is_empty()
        && value.len() <= MAX_REQUEST_ID_LEN
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    ok.then_some(value)
}

/// The trace id a request brings, if it brings a valid one.
pub(crate) fn trace_id_of(headers: &HeaderMap) -> Option<String> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    header("traceparent")
        .and_then(traceparent_trace_id)
        .or_else(|| header(REQUEST_ID_HEADER).and_then(request_id))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

    #[test]
    fn traceparent_follows_the_w3c_rules() {
        let valid = format!("00-{TRACE}-00f067aa0ba902b7-01");
        assert_eq!(traceparent_trace_id(&valid), Some(TRACE));
        // A later version may carry more fields.
        assert_eq!(
            traceparent_trace_id(&format!("01-{TRACE}-00f067aa0ba902b7-01-xyz")),
            Some(TRACE)
        );
        let zeros = "0".repeat(32);
        let huge = "a".repeat(100_000);
        for bad in [
            format!("00-{zeros}-00f067aa0ba902b7-01"),
            format!("00-{TRACE}-0000000000000000-01"),
            format!("ff-{TRACE}-00f067aa0ba902b7-01"),
            format!("00-{}-00f067aa0ba902b7-01", TRACE.to_uppercase()),
            format!("00-{TRACE}-{huge}-01"),
            format!("00-{TRACE}-00f067aa0ba902b7-01-extra"),
            format!("00-{TRACE}-00f067aa0ba902b7"),
            format!("0-{TRACE}-00f067aa0ba902b7-01"),
            format!("00-{TRACE}-00f067aa0ba902b7-1"),
            String::new(),
        ] {
            assert_eq!(traceparent_trace_id(&bad), None, "{bad:.80}");
        }
    }

    #[test]
    fn request_ids_are_short_and_plain() {
        assert_eq!(request_id("28d770d8-1263-4aa2"), Some("28d770d8-1263-4aa2"));
        for bad in ["", "deadbeef}:fake", "a b", "ü", &"a".repeat(65)] {
            assert_eq!(request_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_malformed_traceparent_falls_back_to_the_request_id() {
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", "ff-garbage".parse().unwrap());
        headers.insert(REQUEST_ID_HEADER, "r1".parse().unwrap());
        assert_eq!(trace_id_of(&headers).as_deref(), Some("r1"));
        headers.insert(REQUEST_ID_HEADER, "evil}id".parse().unwrap());
        assert_eq!(trace_id_of(&headers), None);
    }
}
