//! A kept answer sealed at rest: AES-256-GCM under a key derived from the request's
//! `Idempotency-Key`, which Redis never holds. A reader of Redis, its files or its
//! replicas sees the record's name (a digest of scope, method, path and key), a
//! fingerprint of the request keyed by the seal key, and a ciphertext bound to both; a
//! retry that presents the key opens it. An answer can hold a secret (the token a
//! sign-up returns), and the record lives for the layer's ttl.
//!
//! What it protects is what the key's entropy protects: the name lets a reader test
//! guesses of the key offline, so a guessable key (`order-123`) gives its answer away.
//! A client's key is to be random (a UUID), as the IETF draft asks.
//!
//! Layout: `s1`, the 12-byte nonce, then the ciphertext of [`Record::encode`] with its
//! 16-byte tag; the record's name and fingerprint are its associated data, so that a
//! sealed answer moved under another name, or planted, does not open.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};

use super::key;
use super::record::Record;

const SEALED: &[u8] = b"s1";
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;

/// The sealing key of one record: the SHA-256 of what names the record (scope, method,
/// path, client's key) under a label of its own, so that the record's name, a digest of
/// the same parts without the label, tells nothing of it.
#[derive(Clone)]
pub(crate) struct SealKey([u8; 32]);

impl SealKey {
    pub(crate) fn derive(names: &[&[u8]]) -> SealKey {
        let mut parts: Vec<&[u8]> = vec![b"queue-axum idempotency seal v1"];
        parts.extend_from_slice(names);
        SealKey(key::digest_bytes(&parts))
    }

    /// The key's bytes, to key the request's fingerprint with.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The cipher under this key (32 bytes, AES-256's length: never refused).
    fn cipher(&self) -> Option<LessSafeKey> {
        UnboundKey::new(&AES_256_GCM, &self.0)
            .ok()
            .map(LessSafeKey::new)
    }
}

/// What one record is sealed with and bound to.
pub(crate) struct Sealed<'a> {
    pub(crate) key: &'a SealKey,
    /// The record's name in Redis.
    pub(crate) record: &'a str,
    /// The request's fingerprint, the claim's tag.
    pub(crate) fingerprint: &'a str,
}

impl Sealed<'_> {
    fn associated(&self) -> Vec<u8> {
        let mut aad = Vec::with_capacity(self.record.len() + self.fingerprint.len() + 1);
        aad.extend_from_slice(self.record.as_bytes());
        aad.push(b'\n');
        aad.extend_from_slice(self.fingerprint.as_bytes());
        aad
    }
}

/// Why a record could not be sealed: the system's random source failed (the cipher
/// refuses nothing it is given here).
#[derive(Debug)]
pub(crate) struct NotSealed;

pub(crate) fn seal(sealed: &Sealed<'_>, record: &Record) -> Result<Vec<u8>, NotSealed> {
    let mut nonce = [0_u8; NONCE_LEN];
    getrandom::fill(&mut nonce).map_err(|_| NotSealed)?;
    let plain = record.encode();
    let mut out = Vec::with_capacity(SEALED.len() + NONCE_LEN + plain.len() + TAG_LEN);
    out.extend_from_slice(SEALED);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&plain);
    let tag = sealed
        .key
        .cipher()
        .ok_or(NotSealed)?
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(sealed.associated()),
            &mut out[SEALED.len() + NONCE_LEN..],
        )
        .map_err(|_| NotSealed)?;
    out.extend_from_slice(tag.as_ref());
    Ok(out)
}

/// The record `bytes` hold, opened; `None` when they are not a record sealed for this
/// name and request (altered, moved, planted, or kept by a version that did not seal).
pub(crate) fn open(sealed: &Sealed<'_>, bytes: &[u8]) -> Option<Record> {
    let (nonce, ciphertext) = bytes.strip_prefix(SEALED)?.split_at_checked(NONCE_LEN)?;
    let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
    let mut in_out = ciphertext.to_vec();
    let plain = sealed
        .key
        .cipher()?
        .open_in_place(nonce, Aad::from(sealed.associated()), &mut in_out)
        .ok()?;
    Record::decode(plain)
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

    fn sealed<'a>(key: &'a SealKey, record: &'a str) -> Sealed<'a> {
        Sealed {
            key,
            record,
            fingerprint: "fp",
        }
    }

    #[test]
    fn a_sealed_record_opens_with_its_key_and_name_only_and_hides_its_body() {
        let key = SealKey::derive(&[b"", b"POST", b"/users", b"k-1"]);
        let bytes = seal(
            &sealed(&key, "r1"),
            &record(b"{\"token\":\"secret-token\"}"),
        )
        .unwrap();
        assert!(!bytes.windows(12).any(|w| w == b"secret-token"));
        let opened = open(&sealed(&key, "r1"), &bytes).unwrap();
        assert_eq!(opened.body, "{\"token\":\"secret-token\"}");

        let other = SealKey::derive(&[b"", b"POST", b"/users", b"k-2"]);
        assert!(
            open(&sealed(&other, "r1"), &bytes).is_none(),
            "another key's"
        );
        assert!(
            open(&sealed(&key, "r2"), &bytes).is_none(),
            "moved to another name"
        );
        let mut altered = bytes.clone();
        *altered.last_mut().unwrap() ^= 1;
        assert!(open(&sealed(&key, "r1"), &altered).is_none(), "altered");
        assert!(open(&sealed(&key, "r1"), b"s1short").is_none());
    }

    #[test]
    fn a_record_in_clear_is_not_replayed() {
        let key = SealKey::derive(&[b"k"]);
        // What 0.1 kept, or what someone who can write to Redis planted.
        let clear = record(b"{}").encode();
        assert!(open(&sealed(&key, "r"), &clear).is_none());
    }

    #[test]
    fn the_seal_key_is_not_the_records_name() {
        let names: [&[u8]; 4] = [b"", b"POST", b"/users", b"k-1"];
        let name = key::digest(&names);
        let seal_hex: String = SealKey::derive(&names)
            .as_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_ne!(name, seal_hex);
    }
}
