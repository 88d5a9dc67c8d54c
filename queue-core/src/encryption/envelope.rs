//! The sealed form of a JSON value, as Redis holds it in place of the value:
//!
//! ```text
//! {"sealed":"aes-256-gcm/1","key":"<key id>","nonce":"<base64, 12 bytes>","data":"<base64: ciphertext and 16-byte tag>"}
//! ```
//!
//! The plaintext is the value's JSON text. The associated data binds the ciphertext to
//! where it belongs: `queue-core sealed 1\n<key id>\n<queue>\n<field>` (`data`,
//! `returnvalue`, `failedreason`, `log`), so that a sealed payload moved to another
//! queue, or into the return value, does not open. A sealed text (a failure reason, a
//! log line) is stored as the envelope's JSON text. An
//! object is an envelope when it has exactly these four keys and this `sealed` tag:
//! what a Node or Python peer reads and writes too (`tests/node/sealed.mjs`,
//! `tests/python/sealed.py`).

use base64_simd::STANDARD as BASE64;
use ring::aead::{Aad, Nonce};
use serde_json::{Map, Value};

use super::field::Field;
use super::keyring::{self, Keyring};

/// The envelope's `sealed` tag: the cipher and the layout's version.
pub(crate) const TAG: &str = "aes-256-gcm/1";
const NONCE_LEN: usize = 12;

/// Why a value could not be sealed or opened. Never holds key material nor plaintext.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// A sealed value reached an app that has no keyring.
    #[error("sealed with key `{key}`, and this app has no keyring: give it its keys (`QueueApp::builder().keyring(..)`)")]
    NoKeyring {
        /// The id of the key that sealed it.
        key: String,
    },
    /// The key that sealed a value is not in the keyring (removed too early, or not
    /// yet rolled out to this process).
    #[error("sealed with key `{key}`, which the keyring does not hold")]
    UnknownKey {
        /// The id of the key that sealed it.
        key: String,
    },
    /// The ciphertext does not open with its key: altered, or moved from another queue
    /// or field.
    #[error("does not open with key `{key}`: altered, or sealed for another queue or field")]
    DoesNotOpen {
        /// The id of the key it names.
        key: String,
    },
    /// An envelope whose nonce or ciphertext is not base64 of the right length.
    #[error("a sealed value that is not well formed: {0}")]
    Malformed(&'static str),
    /// A queue that seals, in an app without a keyring (refused at start-up; reached
    /// only by a handle made otherwise).
    #[error("this queue seals its payloads, and the app has no keyring")]
    NoKeyToSeal,
    /// The system's random source failed (no nonce).
    #[error("no randomness for a nonce: {0}")]
    NoRandomness(String),
}

/// Whether `value` is an envelope, and the id of the key that sealed it.
pub(crate) fn sealed_with(value: &Value) -> Option<&str> {
    let map = value.as_object()?;
    if map.len() != 4 || map.get("sealed")?.as_str()? != TAG {
        return None;
    }
    map.get("nonce")?.as_str()?;
    map.get("data")?.as_str()?;
    // A key id of the keyring's shape only: it is repeated into failure reasons and
    // logs, and an envelope is whatever Redis holds.
    map.get("key")?.as_str().filter(|id| keyring::is_key_id(id))
}

fn associated(key: &str, queue: &str, field: Field) -> Vec<u8> {
    format!("queue-core sealed 1\n{key}\n{queue}\n{}", field.as_str()).into_bytes()
}

/// `plain` (a value's JSON text) sealed with the keyring's current key; the ciphertext
/// takes `plain`'s place (no copy of a payload that can be large).
pub(crate) fn seal(
    keyring: &Keyring,
    queue: &str,
    field: Field,
    plain: Vec<u8>,
) -> Result<Value, SealError> {
    let mut nonce = [0_u8; NONCE_LEN];
    getrandom::fill(&mut nonce).map_err(|e| SealError::NoRandomness(e.to_string()))?;
    seal_with_nonce(keyring, queue, field, plain, nonce)
}

fn seal_with_nonce(
    keyring: &Keyring,
    queue: &str,
    field: Field,
    plain: Vec<u8>,
    nonce: [u8; NONCE_LEN],
) -> Result<Value, SealError> {
    let (id, key) = keyring.current().ok_or(SealError::NoKeyToSeal)?;
    let mut sealed = plain;
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::from(associated(id, queue, field)),
        &mut sealed,
    )
    .map_err(|_| SealError::Malformed("the plaintext is too long to seal"))?;
    let mut map = Map::with_capacity(4);
    map.insert("sealed".to_owned(), Value::from(TAG));
    map.insert("key".to_owned(), Value::from(id));
    map.insert(
        "nonce".to_owned(),
        Value::from(BASE64.encode_to_string(nonce)),
    );
    map.insert(
        "data".to_owned(),
        Value::from(BASE64.encode_to_string(sealed)),
    );
    Ok(Value::Object(map))
}

/// `value` opened when it is an envelope; any other value as it is (a job added before
/// its queue sealed, or by a producer that does not).
pub(crate) fn open(
    keyring: Option<&Keyring>,
    queue: &str,
    field: Field,
    value: Value,
) -> Result<Value, SealError> {
    let Some(plain) = open_json(keyring, queue, field, &value)? else {
        return Ok(value);
    };
    // Authenticated: what sealed it wrote JSON. One that did not is a peer's bug.
    serde_json::from_slice(&plain).map_err(|_| SealError::Malformed("the plaintext is not JSON"))
}

/// The JSON text sealed in `value` when it is an envelope (`None` otherwise): what a
/// handler deserializes its payload from, without building a JSON value first.
pub(crate) fn open_json(
    keyring: Option<&Keyring>,
    queue: &str,
    field: Field,
    value: &Value,
) -> Result<Option<Vec<u8>>, SealError> {
    let Some(id) = sealed_with(value) else {
        return Ok(None);
    };
    let keyring = keyring.ok_or_else(|| SealError::NoKeyring { key: id.to_owned() })?;
    let key = keyring
        .get(id)
        .ok_or_else(|| SealError::UnknownKey { key: id.to_owned() })?;
    let text = |name: &str| value.get(name).and_then(Value::as_str).unwrap_or_default();
    let nonce = BASE64
        .decode_to_vec(text("nonce"))
        .ok()
        .and_then(|nonce| <[u8; NONCE_LEN]>::try_from(nonce).ok())
        .ok_or(SealError::Malformed("the nonce is not base64 of 12 bytes"))?;
    let mut sealed = BASE64
        .decode_to_vec(text("data"))
        .map_err(|_| SealError::Malformed("the ciphertext is not base64"))?;
    let plain_len = key
        .open_in_place(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(associated(id, queue, field)),
            &mut sealed,
        )
        .map_err(|_| SealError::DoesNotOpen { key: id.to_owned() })?
        .len();
    sealed.truncate(plain_len);
    Ok(Some(sealed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyring() -> Keyring {
        Keyring::new("k1", std::array::from_fn(|i| i as u8 + 1)).unwrap()
    }

    fn sealed(value: &Value) -> Value {
        seal(
            &keyring(),
            "email",
            Field::Data,
            serde_json::to_vec(value).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn a_sealed_value_opens_for_its_queue_and_field_only() {
        let value = serde_json::json!({"to": "ada@example.com"});
        let envelope = sealed(&value);
        assert_eq!(sealed_with(&envelope), Some("k1"));
        assert!(!envelope.to_string().contains("ada@"), "{envelope}");
        let ring = keyring();
        let opened = open(Some(&ring), "email", Field::Data, envelope.clone()).unwrap();
        assert_eq!(opened, value);
        for (queue, field) in [("coupon", Field::Data), ("email", Field::ReturnValue)] {
            let err = open(Some(&ring), queue, field, envelope.clone()).unwrap_err();
            assert_eq!(err, SealError::DoesNotOpen { key: "k1".into() });
        }
    }

    #[test]
    fn an_altered_or_unknown_or_keyless_envelope_is_a_typed_error() {
        let envelope = sealed(&serde_json::json!([1, 2, 3]));
        let ring = keyring();
        let mut altered = envelope.clone();
        let data = altered["data"].as_str().unwrap().to_owned();
        let flipped = if data.starts_with('A') { "B" } else { "A" };
        altered["data"] = Value::from(format!("{flipped}{}", &data[1..]));
        assert_eq!(
            open(Some(&ring), "email", Field::Data, altered).unwrap_err(),
            SealError::DoesNotOpen { key: "k1".into() }
        );
        let other = Keyring::new("k2", [9; 32]).unwrap();
        assert_eq!(
            open(Some(&other), "email", Field::Data, envelope.clone()).unwrap_err(),
            SealError::UnknownKey { key: "k1".into() }
        );
        assert_eq!(
            open(None, "email", Field::Data, envelope).unwrap_err(),
            SealError::NoKeyring { key: "k1".into() }
        );
    }

    #[test]
    fn values_that_are_not_envelopes_pass_through() {
        for value in [
            serde_json::json!({"sealed": TAG, "key": "k1", "nonce": "x"}),
            serde_json::json!({"sealed": "other/1", "key": "k1", "nonce": "x", "data": "y"}),
            serde_json::json!("plain"),
            Value::Null,
        ] {
            assert_eq!(open(None, "q", Field::Data, value.clone()).unwrap(), value);
        }
    }

    /// The same bytes as the Node and Python modules give for this input: the
    /// envelope is a format other languages read, not an accident of this code.
    #[test]
    fn the_envelope_is_the_documented_one() {
        let plain = br#"{"to":"ada@example.com"}"#.to_vec();
        let envelope =
            seal_with_nonce(&keyring(), "email", Field::Data, plain, [0; NONCE_LEN]).unwrap();
        assert_eq!(envelope["sealed"], "aes-256-gcm/1");
        assert_eq!(envelope["nonce"], "AAAAAAAAAAAAAAAA");
        assert_eq!(envelope["data"], KNOWN_DATA);
    }

    /// From `tests/node/sealed.mjs` with the same key, nonce, queue, field and value.
    const KNOWN_DATA: &str = "vVuvdp9vN4R7S6RpD1HHiqcSp2VQ2a5egaZYKnfnSFPmhJsveDzzZw==";
}
