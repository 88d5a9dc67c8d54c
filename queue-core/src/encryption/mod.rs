//! Payloads sealed at rest: a queue that seals stores its jobs' data and return values
//! as AES-256-GCM ciphertexts in a small envelope, under the app's [`Keyring`]:
//!
//! ```text
//! {"sealed":"aes-256-gcm/1","key":"<key id>","nonce":"<base64>","data":"<base64>"}
//! ```
//!
//! Everything else about a job (id, name, options, state) stays readable, so BullMQ's
//! scripts, Bull Board and the dashboard work unchanged. Turn it on with
//! `#[job_queue("email", encrypted)]` or
//! [`QueueAppBuilder::encrypt_queue`](crate::QueueAppBuilder::encrypt_queue); the
//! guide's encryption page has the whole picture (keys, rotation, the dashboard, Node
//! and Python peers).
//!
//! Plain data and rules, no I/O: the producer seals, the handler's plan opens, and the
//! reads that show a payload to a person open only when asked.

mod envelope;
mod field;
mod keyring;

use std::sync::{Arc, PoisonError, RwLock};

use serde_json::Value;

pub use envelope::SealError;
pub(crate) use field::Field;
pub use keyring::{KeySource, Keyring, KeyringError, KEY_BYTES};

pub(crate) use envelope::sealed_with;

/// The app's keyring, shared by every queue handle, worker and watcher, and replaced
/// whole by a rotation while they run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Keys(Arc<RwLock<Option<Arc<Keyring>>>>);

impl Keys {
    pub(crate) fn new(keyring: Option<Keyring>) -> Keys {
        Keys(Arc::new(RwLock::new(keyring.map(Arc::new))))
    }

    /// The keyring now (`None`: the app has none).
    pub(crate) fn keyring(&self) -> Option<Arc<Keyring>> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn replace(&self, keyring: Keyring) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(keyring));
    }

    /// One queue's sealer: what it seals.
    pub(crate) fn for_queue(&self, queue: &str, seals: Seals) -> Sealer {
        Sealer {
            keys: self.clone(),
            queue: queue.into(),
            seals,
        }
    }
}

/// What a queue seals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Seals {
    /// Nothing (it still opens what another producer sealed).
    #[default]
    Nothing,
    /// Its jobs' data and return values.
    Payloads,
    /// Those, and its failure reasons and log lines.
    PayloadsAndNotes,
}

impl Seals {
    /// What a queue seals: its payloads when it `encrypts`, and its failure reasons and
    /// log lines too when the app seals `notes`.
    pub(crate) fn of(encrypts: bool, notes: bool) -> Seals {
        match (encrypts, notes) {
            (false, _) => Seals::Nothing,
            (true, false) => Seals::Payloads,
            (true, true) => Seals::PayloadsAndNotes,
        }
    }
}

/// One queue's sealing: what it seals, and the keys that open it.
#[derive(Debug, Clone)]
pub(crate) struct Sealer {
    keys: Keys,
    queue: Arc<str>,
    seals: Seals,
}

impl Sealer {
    /// Whether this queue seals what is added to it and what its handlers return.
    pub(crate) fn seals(&self) -> bool {
        self.seals != Seals::Nothing
    }

    /// Whether it also seals failure reasons and log lines.
    pub(crate) fn seals_notes(&self) -> bool {
        self.seals == Seals::PayloadsAndNotes
    }

    /// `text` (a failure reason, a log line) sealed as `field`: the envelope's JSON
    /// text, which BullMQ stores where it stores the text.
    pub(crate) fn seal_text(&self, field: Field, text: &str) -> Result<String, SealError> {
        // A string always serializes.
        let plain = serde_json::to_vec(text).unwrap_or_default();
        self.seal(field, plain).map(|envelope| envelope.to_string())
    }

    /// `text` opened when it is a sealed text; as it is otherwise.
    pub(crate) fn open_text(&self, field: Field, text: String) -> Result<String, SealError> {
        open_text_in(Some(&self.keys), &self.queue, field, text)
    }

    /// The app's keys, for values of other queues (a flow's children).
    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    /// `plain`, a value's JSON text, sealed as `field` with the current key.
    pub(crate) fn seal(&self, field: Field, plain: Vec<u8>) -> Result<Value, SealError> {
        let keyring = self.keys.keyring().ok_or(SealError::NoKeyToSeal)?;
        envelope::seal(&keyring, &self.queue, field, plain)
    }

    /// The JSON text sealed in `value` when it is sealed; `None` otherwise. For a value
    /// known to be sealed (the envelope is recognised once, by the opening).
    pub(crate) fn open_json(
        &self,
        field: Field,
        value: &Value,
    ) -> Result<Option<Vec<u8>>, SealError> {
        let keyring = self.keys.keyring();
        envelope::open_json(keyring.as_deref(), &self.queue, field, value)
    }

    /// `value` opened when it is sealed; as it is otherwise.
    pub(crate) fn open(&self, field: Field, value: Value) -> Result<Value, SealError> {
        open_in(Some(&self.keys), &self.queue, field, value)
    }
}

/// `value`, a `field` of a job of `queue`, opened when it is sealed (`keys`: the app's,
/// `None` when there are none at hand).
pub(crate) fn open_in(
    keys: Option<&Keys>,
    queue: &str,
    field: Field,
    value: Value,
) -> Result<Value, SealError> {
    if sealed_with(&value).is_none() {
        return Ok(value);
    }
    let keyring = keys.and_then(Keys::keyring);
    envelope::open(keyring.as_deref(), queue, field, value)
}

/// The envelope of `text` (a failure reason, a log line: what BullMQ stores as text),
/// when it is a sealed value's JSON text.
fn sealed_text(text: &str) -> Option<Value> {
    // Most texts are not sealed: only one that looks like an envelope is parsed.
    if !(text.starts_with('{') && text.contains(envelope::TAG)) {
        return None;
    }
    let value = serde_json::from_str::<Value>(text).ok()?;
    sealed_with(&value).is_some().then_some(value)
}

/// The id of the key that sealed `text`, when it is a sealed value's JSON text: how a
/// page tells that a failure reason or a log line is sealed, and by which key, without
/// opening it ([`JobInfo::sealed_with`](crate::JobInfo::sealed_with) tells it of a
/// job's payload and return value).
///
/// ```
/// use queue_core::encryption::sealed_text_key;
///
/// let reason = r#"{"sealed":"aes-256-gcm/1","key":"k1","nonce":"AAAA","data":"AAAA"}"#;
/// assert_eq!(sealed_text_key(reason).as_deref(), Some("k1"));
/// assert_eq!(sealed_text_key("the mail server refused"), None);
/// ```
pub fn sealed_text_key(text: &str) -> Option<String> {
    sealed_text(text).and_then(|value| sealed_with(&value).map(str::to_owned))
}

/// `text`, a `field` of a job of `queue` that BullMQ stores as text (a failure reason, a
/// log line), opened when it is a sealed value's JSON; as it is otherwise.
pub(crate) fn open_text_in(
    keys: Option<&Keys>,
    queue: &str,
    field: Field,
    text: String,
) -> Result<String, SealError> {
    let Some(value) = sealed_text(&text) else {
        return Ok(text);
    };
    match open_in(keys, queue, field, value)? {
        Value::String(opened) => Ok(opened),
        other => Ok(other.to_string()),
    }
}
