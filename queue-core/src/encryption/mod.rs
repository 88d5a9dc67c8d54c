//! Payloads sealed at rest: a queue that seals stores its jobs' data and return values
//! as AES-256-GCM ciphertexts in a small envelope ([`envelope`]), under the app's
//! [`Keyring`]. Everything else about a job (id, name, options, state) stays readable,
//! so BullMQ's scripts, Bull Board and the dashboard work unchanged.
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

    /// One queue's sealer: `seals` says whether what it adds is sealed.
    pub(crate) fn for_queue(&self, queue: &str, seals: bool) -> Sealer {
        Sealer {
            keys: self.clone(),
            queue: queue.into(),
            seals,
        }
    }
}

/// One queue's sealing: whether its payloads are sealed, and the keys that open them.
#[derive(Debug, Clone)]
pub(crate) struct Sealer {
    keys: Keys,
    queue: Arc<str>,
    seals: bool,
}

impl Sealer {
    /// Whether this queue seals what is added to it and what its handlers return.
    pub(crate) fn seals(&self) -> bool {
        self.seals
    }

    /// The app's keys, for values of other queues (a flow's children).
    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    /// `plain`, a value's JSON text, sealed as `field` with the current key.
    pub(crate) fn seal(&self, field: Field, plain: &[u8]) -> Result<Value, SealError> {
        let keyring = self.keys.keyring().ok_or(SealError::NoKeyToSeal)?;
        envelope::seal(&keyring, &self.queue, field, plain)
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
