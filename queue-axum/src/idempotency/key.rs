//! The `Idempotency-Key` header, read as the IETF draft writes it (a Structured Field
//! string, `"8e03978e-40d5-43e8-bc93-6894a57f9324"`) or bare, as most clients send it;
//! the [`IdempotencyKey`] extractor; and the digests a request is kept and compared
//! under.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue};
use sha2::{Digest, Sha256};

use crate::limits::MAX_IDEMPOTENCY_KEY_LEN;
use crate::rejection::InvalidIdempotencyKey;

/// The request's key: `None` without the header; refused when it is sent twice, or is
/// not 1 to [`MAX_IDEMPOTENCY_KEY_LEN`] visible ASCII characters (spaces inside
/// allowed), bare or as a Structured Field string.
pub(crate) fn from_headers(headers: &HeaderMap) -> Result<Option<String>, InvalidIdempotencyKey> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY_HEADER).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(InvalidIdempotencyKey);
    }
    parse(value).map(Some)
}

fn parse(value: &HeaderValue) -> Result<String, InvalidIdempotencyKey> {
    let text = value.to_str().map_err(|_| InvalidIdempotencyKey)?.trim();
    let key = match text.strip_prefix('"') {
        Some(quoted) => sf_string(quoted).ok_or(InvalidIdempotencyKey)?,
        None => text.to_owned(),
    };
    let usable = !key.trim().is_empty()
        && key.len() <= MAX_IDEMPOTENCY_KEY_LEN
        && key.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
    if usable {
        Ok(key)
    } else {
        Err(InvalidIdempotencyKey)
    }
}

/// The inside of an RFC 8941 string after its opening quote: up to the closing quote,
/// which must end the value; `\"` and `\\` are the only escapes.
fn sf_string(rest: &str) -> Option<String> {
    let mut out = String::with_capacity(rest.len());
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                escaped @ ('"' | '\\') => out.push(escaped),
                _ => return None,
            },
            '"' => return chars.next().is_none().then_some(out),
            c => out.push(c),
        }
    }
    None
}

/// Hex of the SHA-256 of `parts`, each preceded by its length, so that no two lists of
/// parts share a digest (`("ab", "c")` and `("a", "bc")` differ).
pub(crate) fn digest(parts: &[&[u8]]) -> String {
    digest_bytes(parts)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The SHA-256 of `parts` as [`digest`] makes it, as bytes.
pub(crate) fn digest_bytes(parts: &[&[u8]]) -> [u8; 32] {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part);
    }
    hash.finalize().into()
}

/// The request's `Idempotency-Key` header, for making a job id from it: a client
/// retrying a request gets the same job instead of a second one. (To answer a retry
/// with the first answer whatever the route does, wrap the route in
/// [`IdempotencyLayer`](crate::IdempotencyLayer).)
///
/// The key is 1 to 255 visible ASCII characters, sent bare or as the IETF draft writes
/// it, a quoted string (`"8e03978e-..."`: the same key); anything else, or the header
/// twice, is refused with [`InvalidIdempotencyKey`], 400.
///
/// A key is the client's word, and two clients may pick the same one: the job id is
/// always made within a scope the application supplies (the user or tenant the request
/// is authenticated as, and the route), so that one tenant's key never lands on another
/// tenant's job.
///
/// ```
/// use queue_axum::IdempotencyKey;
/// use queue_core::JobOptions;
///
/// fn options(key: &IdempotencyKey, tenant: &str) -> JobOptions {
///     let mut opts = JobOptions::new().attempts(3);
///     if let Some(id) = key.job_id(&format!("{tenant}/exports"), "export") {
///         opts = opts.job_id(id); // "export-<hash of scope and key>"
///     }
///     opts
/// }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdempotencyKey(Option<String>);

/// The header [`IdempotencyKey`] reads.
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";

impl IdempotencyKey {
    /// The header's value, if the request had one.
    pub fn key(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// A BullMQ-safe job id for this key within `scope`: `prefix-<uuid v5 of scope and
    /// key>`. The same scope and key always give the same id; another scope (another
    /// tenant, another route) never does.
    pub fn job_id(&self, scope: &str, prefix: &str) -> Option<String> {
        let key = self.0.as_deref()?;
        // The scope's length first, so that ("ab", "c") and ("a", "bc") differ.
        let name = format!("{}:{scope}:{key}", scope.len());
        Some(format!(
            "{prefix}-{}",
            uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, name.as_bytes()).simple()
        ))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = InvalidIdempotencyKey;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        // As `IdempotencyLayer` reads it: bare or a quoted string, once.
        from_headers(&parts.headers).map(IdempotencyKey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(raw: &str) -> Result<String, InvalidIdempotencyKey> {
        parse(&HeaderValue::from_str(raw).unwrap())
    }

    #[test]
    fn bare_and_quoted_keys_are_the_same_key() {
        assert_eq!(key("k-1").unwrap(), "k-1");
        assert_eq!(key("\"k-1\"").unwrap(), "k-1");
        assert_eq!(key(" a b ").unwrap(), "a b");
        assert_eq!(key(r#""say \"hi\"""#).unwrap(), "say \"hi\"");
        assert_eq!(
            key(&"k".repeat(MAX_IDEMPOTENCY_KEY_LEN)).unwrap().len(),
            255
        );
    }

    #[test]
    fn malformed_keys_are_refused() {
        for bad in [
            "",
            "\"\"",
            "\" \"",
            "\"open",
            "\"a\"b\"",
            "\"a\\x\"",
            "a\tb",
            &"k".repeat(MAX_IDEMPOTENCY_KEY_LEN + 1),
        ] {
            assert!(key(bad).is_err(), "{bad:?}");
        }
        let non_ascii = HeaderValue::from_bytes("café".as_bytes()).unwrap();
        assert!(parse(&non_ascii).is_err());
    }

    #[test]
    fn a_second_header_is_refused() {
        let mut headers = HeaderMap::new();
        assert_eq!(from_headers(&headers).unwrap(), None);
        headers.append(IDEMPOTENCY_KEY_HEADER, HeaderValue::from_static("a"));
        assert_eq!(from_headers(&headers).unwrap(), Some("a".to_owned()));
        headers.append(IDEMPOTENCY_KEY_HEADER, HeaderValue::from_static("b"));
        assert!(from_headers(&headers).is_err());
    }

    #[test]
    fn digests_keep_their_parts_apart() {
        assert_ne!(digest(&[b"ab", b"c"]), digest(&[b"a", b"bc"]));
        assert_eq!(digest(&[b"x"]), digest(&[b"x"]));
        assert_eq!(digest(&[]).len(), 64);
    }
}

#[cfg(test)]
mod extractor_tests {
    use super::IdempotencyKey;

    #[test]
    fn keys_become_valid_stable_job_ids_within_their_scope() {
        let key = IdempotencyKey(Some("a:b/c".into()));
        let id = key.job_id("tenant-1", "signup").unwrap();
        assert!(id.starts_with("signup-") && !id.contains(':') && id.len() == "signup-".len() + 32);
        assert_eq!(
            key.job_id("tenant-1", "signup"),
            Some(id.clone()),
            "the same key, the same id"
        );
        assert_ne!(
            key.job_id("tenant-2", "signup"),
            Some(id),
            "another tenant, another job"
        );
        let split = |scope: &str, k: &str| IdempotencyKey(Some(k.into())).job_id(scope, "x");
        assert_ne!(split("ab", "c"), split("a", "bc"));
        assert_eq!(IdempotencyKey(None).job_id("t", "x"), None);
    }
}
