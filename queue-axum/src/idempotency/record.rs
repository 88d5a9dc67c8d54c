//! A kept answer as bytes: its status, the headers a replay repeats, and its body.
//!
//! Layout: `v1`, the status (2 bytes), the number of headers (2 bytes), each header as
//! its name's length (2 bytes), name, value's length (4 bytes) and value, then the body.
//! Lengths are big-endian.

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

const VERSION: &[u8] = b"v1";

/// Headers that describe this one connection or message, not the answer: a replay
/// computes its own.
const NOT_REPLAYED: [&str; 10] = [
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authenticate",
    "proxy-connection",
    "content-length",
    "date",
];

/// An answer, as kept and as replayed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Record {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Record {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let kept: Vec<(&HeaderName, &HeaderValue)> = self
            .headers
            .iter()
            .filter(|(name, _)| !NOT_REPLAYED.contains(&name.as_str()))
            .collect();
        let mut out = Vec::with_capacity(self.body.len() + 64);
        out.extend_from_slice(VERSION);
        out.extend_from_slice(&self.status.as_u16().to_be_bytes());
        out.extend_from_slice(&(kept.len().min(usize::from(u16::MAX)) as u16).to_be_bytes());
        for (name, value) in kept.into_iter().take(usize::from(u16::MAX)) {
            // Header names are short and values far below 4 GiB (hyper limits them).
            out.extend_from_slice(&(name.as_str().len() as u16).to_be_bytes());
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(&(value.len() as u32).to_be_bytes());
            out.extend_from_slice(value.as_bytes());
        }
        out.extend_from_slice(&self.body);
        out
    }

    /// `None` for bytes this version did not write.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Record> {
        let mut rest = bytes.strip_prefix(VERSION)?;
        let mut take = |n: usize| -> Option<&[u8]> {
            let (head, tail) = rest.split_at_checked(n)?;
            rest = tail;
            Some(head)
        };
        let status = StatusCode::from_u16(u16::from_be_bytes(take(2)?.try_into().ok()?)).ok()?;
        let count = u16::from_be_bytes(take(2)?.try_into().ok()?);
        let mut headers = HeaderMap::new();
        for _ in 0..count {
            let name_len = u16::from_be_bytes(take(2)?.try_into().ok()?);
            let name = HeaderName::from_bytes(take(usize::from(name_len))?).ok()?;
            let value_len = u32::from_be_bytes(take(4)?.try_into().ok()?);
            let value = HeaderValue::from_bytes(take(usize::try_from(value_len).ok()?)?).ok()?;
            headers.append(name, value);
        }
        Some(Record {
            status,
            headers,
            body: Bytes::copy_from_slice(rest),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_comes_back_as_it_went_without_per_message_headers() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.append("set-cookie", HeaderValue::from_static("a=1"));
        headers.append("set-cookie", HeaderValue::from_static("b=2"));
        headers.insert("content-length", HeaderValue::from_static("2"));
        headers.insert(
            "date",
            HeaderValue::from_static("Tue, 01 Dec 2026 00:00:00 GMT"),
        );
        let record = Record {
            status: StatusCode::ACCEPTED,
            headers,
            body: Bytes::from_static(b"{}"),
        };
        let back = Record::decode(&record.encode()).unwrap();
        assert_eq!(back.status, StatusCode::ACCEPTED);
        assert_eq!(back.body, record.body);
        assert_eq!(back.headers.get_all("set-cookie").iter().count(), 2);
        assert!(back.headers.get("content-length").is_none() && back.headers.get("date").is_none());
        assert_eq!(back.headers.len(), 3);
    }

    #[test]
    fn bytes_of_another_shape_are_no_record() {
        assert_eq!(Record::decode(b""), None);
        assert_eq!(Record::decode(b"v2\x00\xc8\x00\x00"), None);
        assert_eq!(Record::decode(b"v1\x00\xc8\x00\x01\x00\x05ab"), None);
        assert!(Record::decode(b"v1\x00\xc8\x00\x00body").is_some());
    }
}
