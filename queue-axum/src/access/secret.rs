//! What a credential is checked against: a token kept only as its SHA-256.
//!
//! A presented credential is hashed and compared in constant time: the comparison
//! takes as long whatever the credential and wherever it differs, so its timing tells
//! nothing, not even the secret's length.

use sha2::{Digest, Sha256};

#[cfg(doc)]
use super::AccessPolicy;

/// What a credential is checked against: a token (or password), kept only as its
/// SHA-256, or a SHA-256 given as hex, so that the configuration does not hold the
/// token itself.
///
/// A SHA-256 suits a long random token, which cannot be guessed from its hash. It is
/// not a password hash: for passwords people choose, check an argon2 or bcrypt hash in
/// a policy of your own ([`AccessPolicy`]).
///
/// ```
/// use queue_axum::access::Secret;
///
/// let from_token = Secret::from("4f1c0b2e9d7a6c5b8e3f2a1d0c9b8a7f");
/// let from_hash =
///     Secret::sha256_hex("5e3bcca2d18b9404b210628cff6bf53270404f072f267050a3961d99864b7edd")?;
/// assert!(Secret::sha256_hex("beef").is_err());
/// # let _ = (from_token, from_hash);
/// # Ok::<(), queue_axum::access::InvalidSecret>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    digest: [u8; 32],
}

/// A secret that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidSecret {
    /// `Secret::sha256_hex` wants 64 hex digits.
    #[error("a SHA-256 is 64 hex digits; got {length} characters{detail}")]
    NotSha256Hex {
        /// How many characters were given.
        length: usize,
        /// What else was wrong, if anything.
        detail: &'static str,
    },
    /// An empty token would let anyone in who sends an empty password.
    #[error("an empty token is no secret")]
    Empty,
}

impl Secret {
    /// The token (or password) itself. An empty one makes a secret nothing matches
    /// ([`Secret::try_token`] refuses it instead).
    pub fn token(token: impl AsRef<[u8]>) -> Self {
        Self::try_token(token).unwrap_or(Secret {
            // No credential hashes to this: SHA-256 has no known preimage of it.
            digest: [0; 32],
        })
    }

    /// The token itself, refusing an empty one.
    pub fn try_token(token: impl AsRef<[u8]>) -> Result<Self, InvalidSecret> {
        let token = token.as_ref();
        if token.is_empty() {
            return Err(InvalidSecret::Empty);
        }
        Ok(Secret {
            digest: sha256(token),
        })
    }

    /// The token's SHA-256, as 64 hex digits (what `sha256sum` prints).
    pub fn sha256_hex(hex: &str) -> Result<Self, InvalidSecret> {
        let hex = hex.trim();
        let invalid = |detail| InvalidSecret::NotSha256Hex {
            length: hex.chars().count(),
            detail,
        };
        if hex.len() != 64 {
            return Err(invalid(""));
        }
        let mut digest = [0u8; 32];
        for (i, byte) in digest.iter_mut().enumerate() {
            *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2).ok_or(invalid(""))?, 16)
                .map_err(|_| invalid(", not all of them hex digits"))?;
        }
        Ok(Secret { digest })
    }

    /// Whether `presented` is this secret, in constant time.
    pub(super) fn matches(&self, presented: &[u8]) -> bool {
        let presented = sha256(presented);
        let difference = self
            .digest
            .iter()
            .zip(presented.iter())
            .fold(0u8, |diff, (a, b)| diff | (a ^ b));
        std::hint::black_box(difference) == 0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl From<&str> for Secret {
    fn from(token: &str) -> Self {
        Secret::token(token)
    }
}

impl From<String> for Secret {
    fn from(token: String) -> Self {
        Secret::token(token)
    }
}

impl From<&String> for Secret {
    fn from(token: &String) -> Self {
        Secret::token(token)
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_matches_its_token_only() {
        let secret = Secret::from("s3cret");
        assert!(secret.matches(b"s3cret"));
        assert!(!secret.matches(b"s3cre"));
        assert!(!secret.matches(b"s3cret "));
        let hashed =
            Secret::sha256_hex("5e3bcca2d18b9404b210628cff6bf53270404f072f267050a3961d99864b7edd")
                .unwrap();
        assert!(hashed.matches(b"s3cret-operator-token-0123456789"));
        assert_eq!(format!("{hashed:?}"), "Secret(..)");
        // An empty token is refused, and matches nothing where it was let through.
        assert_eq!(Secret::try_token(""), Err(InvalidSecret::Empty));
        assert!(!Secret::token("").matches(b""));
        assert!(matches!(
            Secret::sha256_hex(&"g".repeat(64)),
            Err(InvalidSecret::NotSha256Hex { length: 64, .. })
        ));
    }
}
