//! A kept answer sealed at rest: AES-256-GCM under a key derived from the request's
//! `Idempotency-Key` itself, which Redis never holds (it keeps a digest of it, made
//! another way). Whoever reads Redis, its files or its replicas sees a ciphertext; a
//! retry that presents the key opens it. An answer can hold a secret (the token a
//! sign-up returns), and the record lives for the layer's ttl.
//!
//! Layout: `s1`, the 12-byte nonce, then the ciphertext of [`Record::encode`] with its
//! 16-byte tag. Records kept before sealing (`v1`, in clear) are still read, so that an
//! upgrade does not break the retries of answers kept just before it.

use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::{Aes256Gcm, Key, Nonce};

use super::key;
use super::record::Record;

const SEALED: &[u8] = b"s1";
const NONCE_LEN: usize = 12;

/// The sealing key of one record: the SHA-256 of what names the record (scope, method,
/// path, client's key) under a label of its own, so that the record's name, a digest of
/// the same parts without the label, tells nothing of it.
#[derive(Clone)]
pub(crate) struct SealKey(Key<Aes256Gcm>);

impl SealKey {
    pub(crate) fn derive(names: &[&[u8]]) -> SealKey {
        let mut parts: Vec<&[u8]> = vec![b"queue-axum idempotency seal v1"];
        parts.extend_from_slice(names);
        SealKey(key::digest_bytes(&parts).into())
    }
}

/// Why a record could not be sealed: the system's random source failed.
#[derive(Debug)]
pub(crate) struct NoRandomness;

pub(crate) fn seal(key: &SealKey, record: &Record) -> Result<Vec<u8>, NoRandomness> {
    let mut nonce = [0_u8; NONCE_LEN];
    getrandom::fill(&mut nonce).map_err(|_| NoRandomness)?;
    let cipher = Aes256Gcm::new(&key.0);
    let sealed = cipher
        .encrypt(Nonce::from_slice(&nonce), record.encode().as_slice())
        .map_err(|_| NoRandomness)?;
    let mut out = Vec::with_capacity(SEALED.len() + NONCE_LEN + sealed.len());
    out.extend_from_slice(SEALED);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    Ok(out)
}

/// The record `bytes` hold: opened with `key` when sealed, read as is when kept in
/// clear by an earlier version; `None` when it is neither (altered, or another key's).
pub(crate) fn open(key: &SealKey, bytes: &[u8]) -> Option<Record> {
    let Some(sealed) = bytes.strip_prefix(SEALED) else {
        return Record::decode(bytes);
    };
    let (nonce, ciphertext) = sealed.split_at_checked(NONCE_LEN)?;
    let plain = Aes256Gcm::new(&key.0)
        .decrypt(Nonce::from_slice(nonce), ciphertext)
        .ok()?;
    Record::decode(&plain)
}

#[cfg(test)]
mod tests {
    use axum::body::Bytes;
    use axum::http::{HeaderMap, StatusCode};

    use super::*;

    fn record(body: &'static [u8]) -> Record {
        Record {
            status: StatusCode::ACCEPTED,
            headers: HeaderMap::new(),
            body: Bytes::from_static(body),
        }
    }

    #[test]
    fn a_sealed_record_opens_with_its_key_only_and_hides_its_body() {
        let key = SealKey::derive(&[b"", b"POST", b"/users", b"k-1"]);
        let sealed = seal(&key, &record(b"{\"token\":\"secret-token\"}")).unwrap();
        assert!(!sealed.windows(12).any(|w| w == b"secret-token"));
        assert_eq!(
            open(&key, &sealed).unwrap().body,
            "{\"token\":\"secret-token\"}"
        );

        let other = SealKey::derive(&[b"", b"POST", b"/users", b"k-2"]);
        assert!(open(&other, &sealed).is_none(), "another key's");
        let mut altered = sealed.clone();
        *altered.last_mut().unwrap() ^= 1;
        assert!(open(&key, &altered).is_none(), "altered");
        assert!(open(&key, b"s1short").is_none());
    }

    #[test]
    fn a_record_kept_in_clear_before_sealing_is_still_read() {
        let key = SealKey::derive(&[b"k"]);
        let clear = record(b"{}").encode();
        assert_eq!(open(&key, &clear).unwrap().body, "{}");
    }

    #[test]
    fn the_seal_key_is_not_the_records_name() {
        let names: [&[u8]; 4] = [b"", b"POST", b"/users", b"k-1"];
        let name = key::digest(&names);
        let seal_key = SealKey::derive(&names);
        let seal_hex: String = seal_key.0.iter().map(|b| format!("{b:02x}")).collect();
        assert_ne!(name, seal_hex);
    }
}
