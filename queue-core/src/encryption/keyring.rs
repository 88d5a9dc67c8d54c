//! The keys payloads are sealed with: a current key and older ones, by id.

use std::fmt;
use std::path::Path;

use base64::Engine as _;
use futures::future::BoxFuture;
use ring::aead::{LessSafeKey, UnboundKey, AES_256_GCM};

/// The length of a key: AES-256 takes 32 bytes.
pub const KEY_BYTES: usize = 32;

/// The keys an app seals and opens payloads with: the **current** key, which seals
/// what is added from now on, and older keys by id, which still open what they sealed.
/// Rotating is adding a new key in front; an old key leaves the keyring once no job
/// sealed with it remains (their retention says when).
///
/// Its text form, for an environment variable or a file: entries separated by commas or
/// new lines, each `id=key` with the key as standard base64 of 32 bytes (make one with
/// `openssl rand -base64 32`); the **first** entry is the current key; blank entries
/// and lines starting with `#` are skipped. An id is 1 to 64 of `A-Z a-z 0-9 . _ -`,
/// and is stored beside each ciphertext: name keys by when they were made
/// (`2026-12`), never by what they are.
///
/// ```
/// use queue_core::encryption::Keyring;
///
/// let keyring = Keyring::parse(
///     "2026-12=AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=,
///      2026-06=ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=",
/// )?;
/// assert_eq!(keyring.current_id(), "2026-12");
/// assert_eq!(keyring.ids().collect::<Vec<_>>(), ["2026-12", "2026-06"]);
/// // Debug output names the keys, never their bytes.
/// assert!(!format!("{keyring:?}").contains("AQID"));
/// # Ok::<(), queue_core::encryption::KeyringError>(())
/// ```
#[derive(Clone)]
pub struct Keyring {
    /// Current first; ids unique.
    keys: Vec<(String, LessSafeKey)>,
}

/// Why a keyring could not be made. Never holds key material.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyringError {
    /// No key at all.
    #[error("the keyring holds no key: give at least one `id=base64-of-32-bytes` entry")]
    Empty,
    /// An entry that is not `id=key`, with an id or a key that does not fit.
    #[error("keyring entry #{entry}: {reason}")]
    BadEntry {
        /// The entry's number, 1-based, among the non-blank ones.
        entry: usize,
        /// What is wrong with it (never its key).
        reason: String,
    },
    /// Two keys with one id: which one sealed a job would be ambiguous.
    #[error("keyring: the id `{id}` is given twice")]
    DuplicateId {
        /// The id.
        id: String,
    },
    /// The environment variable is not set (or not Unicode).
    #[error("keyring: the environment variable `{var}` is not set")]
    MissingVar {
        /// The variable.
        var: String,
    },
    /// The file could not be read.
    #[error("keyring: cannot read `{path}`: {source}")]
    File {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A [`KeySource`] could not answer.
    #[error("keyring: the key source failed: {0}")]
    Source(String),
}

impl Keyring {
    /// A keyring of one key, `id`, which is current. Add older ones with
    /// [`with_older`](Self::with_older).
    ///
    /// ```
    /// let keyring = queue_core::encryption::Keyring::new("2026-12", [7; 32])?
    ///     .with_older("2026-06", [9; 32])?;
    /// assert_eq!(keyring.current_id(), "2026-12");
    /// # Ok::<(), queue_core::encryption::KeyringError>(())
    /// ```
    pub fn new(id: impl Into<String>, key: [u8; KEY_BYTES]) -> Result<Keyring, KeyringError> {
        let mut keyring = Keyring { keys: Vec::new() };
        keyring.push(1, id.into(), &key)?;
        Ok(keyring)
    }

    /// This keyring with `id` as an older key: it opens what it sealed, and seals
    /// nothing new.
    pub fn with_older(
        mut self,
        id: impl Into<String>,
        key: [u8; KEY_BYTES],
    ) -> Result<Keyring, KeyringError> {
        let entry = self.keys.len() + 1;
        self.push(entry, id.into(), &key)?;
        Ok(self)
    }

    /// Reads the text form (see the type's documentation).
    pub fn parse(text: &str) -> Result<Keyring, KeyringError> {
        let mut keyring = Keyring { keys: Vec::new() };
        // A comment is a whole line, commas and all.
        let entries = text
            .lines()
            .filter(|line| !line.trim_start().starts_with('#'))
            .flat_map(|line| line.split(','))
            .map(str::trim)
            .filter(|e| !e.is_empty() && !e.starts_with('#'));
        for (index, entry) in entries.enumerate() {
            let number = index + 1;
            let bad = |reason: &str| KeyringError::BadEntry {
                entry: number,
                reason: reason.to_owned(),
            };
            let (id, key) = entry.split_once('=').ok_or_else(|| bad("not `id=key`"))?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(key.trim())
                .map_err(|_| bad("the key is not standard base64"))?;
            let key: [u8; KEY_BYTES] =
                bytes
                    .try_into()
                    .map_err(|b: Vec<u8>| KeyringError::BadEntry {
                        entry: number,
                        reason: format!("the key is {} bytes; AES-256 takes {KEY_BYTES}", b.len()),
                    })?;
            keyring.push(number, id.trim().to_owned(), &key)?;
        }
        if keyring.keys.is_empty() {
            return Err(KeyringError::Empty);
        }
        Ok(keyring)
    }

    /// Reads the text form from the environment variable `var`.
    pub fn from_env(var: &str) -> Result<Keyring, KeyringError> {
        let text = std::env::var(var).map_err(|_| KeyringError::MissingVar {
            var: var.to_owned(),
        })?;
        Keyring::parse(&text)
    }

    /// Reads the text form from a file (a mounted secret, say).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Keyring, KeyringError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| KeyringError::File {
            path: path.display().to_string(),
            source,
        })?;
        Keyring::parse(&text)
    }

    /// A new random key named `id`, as one entry of the text form (`id=<base64>`): what
    /// a set-up script writes to a new keyring file. Keep it secret, and keep it while
    /// any job sealed with it remains.
    ///
    /// ```
    /// use queue_core::encryption::Keyring;
    ///
    /// let entry = Keyring::new_key_entry("2027-01")?;
    /// assert_eq!(Keyring::parse(&entry)?.current_id(), "2027-01");
    /// # Ok::<(), queue_core::encryption::KeyringError>(())
    /// ```
    pub fn new_key_entry(id: &str) -> Result<String, KeyringError> {
        let mut key = [0_u8; KEY_BYTES];
        getrandom::fill(&mut key)
            .map_err(|e| KeyringError::Source(format!("no randomness: {e}")))?;
        // Checks the id as a keyring would.
        Keyring::new(id, key)?;
        Ok(format!(
            "{id}={}",
            base64::engine::general_purpose::STANDARD.encode(key)
        ))
    }

    /// The id of the key that seals.
    pub fn current_id(&self) -> &str {
        // A keyring is never empty: every constructor refuses that.
        self.keys.first().map_or("", |(id, _)| id)
    }

    /// Every key's id, the current one first.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|(id, _)| id.as_str())
    }

    /// The current key, with its id.
    pub(crate) fn current(&self) -> Option<(&str, &LessSafeKey)> {
        self.keys.first().map(|(id, key)| (id.as_str(), key))
    }

    /// The key `id`.
    pub(crate) fn get(&self, id: &str) -> Option<&LessSafeKey> {
        self.keys
            .iter()
            .find(|(own, _)| own == id)
            .map(|(_, key)| key)
    }

    fn push(
        &mut self,
        entry: usize,
        id: String,
        key: &[u8; KEY_BYTES],
    ) -> Result<(), KeyringError> {
        if !is_key_id(&id) {
            return Err(KeyringError::BadEntry {
                entry,
                // Not shown: an entry with its parts swapped would show its key.
                reason: "the id is not 1 to 64 of A-Z a-z 0-9 . _ -".to_owned(),
            });
        }
        if self.get(&id).is_some() {
            return Err(KeyringError::DuplicateId { id });
        }
        // A key of AES-256's length is never refused.
        let key = UnboundKey::new(&AES_256_GCM, key).map_err(|_| KeyringError::BadEntry {
            entry,
            reason: "not an AES-256 key".to_owned(),
        })?;
        self.keys.push((id, LessSafeKey::new(key)));
        Ok(())
    }
}

/// Whether `id` is a key id: 1 to 64 of `A-Z a-z 0-9 . _ -`.
pub(crate) fn is_key_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("current", &self.current_id())
            .field("ids", &self.ids().collect::<Vec<_>>())
            .finish()
    }
}

/// Where an app's keyring comes from when it is not at hand at start-up: a secrets
/// manager, a KMS. Read once by `build`, and again by
/// [`QueueApp::reload_keyring`](crate::QueueApp::reload_keyring) (rotation without a
/// restart).
///
/// ```
/// use futures::future::BoxFuture;
/// use queue_core::encryption::{KeySource, Keyring, KeyringError};
///
/// struct Vault;
///
/// impl KeySource for Vault {
///     fn keyring(&self) -> BoxFuture<'_, Result<Keyring, KeyringError>> {
///         Box::pin(async {
///             // ... fetched from the secrets manager ...
///             Keyring::new("2026-12", [7; 32])
///         })
///     }
/// }
/// let builder = queue_core::QueueApp::builder().keyring_from(Vault);
/// # let _ = builder;
/// ```
pub trait KeySource: Send + Sync + 'static {
    /// The keyring as it is now.
    fn keyring(&self) -> BoxFuture<'_, Result<Keyring, KeyringError>>;
}

impl fmt::Debug for dyn KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeySource")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str = "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=";

    #[test]
    fn the_first_entry_is_current_and_comments_and_blanks_are_skipped() {
        let keyring =
            Keyring::parse(&format!("# rotated 2026-12, monthly\n b={K1} \n\n,a={K1}")).unwrap();
        assert_eq!(keyring.current_id(), "b");
        assert_eq!(keyring.ids().collect::<Vec<_>>(), ["b", "a"]);
    }

    #[test]
    fn bad_entries_are_refused_without_showing_the_key() {
        let cases = [
            ("", "holds no key"),
            ("# nothing", "holds no key"),
            ("k1", "not `id=key`"),
            ("k1=not base64!", "not standard base64"),
            ("k1=AQID", "3 bytes"),
            (&format!("k 1={K1}"), "is not 1 to 64"),
            (&format!("k1={K1},k1={K1}"), "given twice"),
        ];
        for (text, expected) in cases {
            let err = Keyring::parse(text).unwrap_err().to_string();
            assert!(err.contains(expected), "{text:?}: {err}");
            assert!(!err.contains("AQID"), "{err}");
        }
    }

    #[test]
    fn a_missing_variable_is_named() {
        let err = Keyring::from_env("QUEUE_CORE_TEST_NO_SUCH_VAR").unwrap_err();
        assert!(
            err.to_string().contains("QUEUE_CORE_TEST_NO_SUCH_VAR"),
            "{err}"
        );
    }
}
