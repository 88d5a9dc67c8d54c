//! Claims: short-lived records that the first caller of a key takes, and whose outcome
//! the later callers of the key read. In Redis by the engine's scripts; in memory, by
//! the same rules, for an inline app.

use std::sync::Arc;
use std::time::Duration;

mod claim;

pub use claim::{Claim, ClaimToken};

use super::engine::{Connection, RedisClaims};
use super::inline::MemoryClaims;
use crate::error::Error;

/// Where one namespace's claims live.
#[derive(Debug, Clone)]
pub(crate) enum ClaimStore {
    Redis(RedisClaims),
    Memory {
        claims: Arc<MemoryClaims>,
        base: String,
    },
}

impl ClaimStore {
    pub(super) fn redis(conn: Arc<Connection>, base: String, timeout: Duration) -> Self {
        ClaimStore::Redis(RedisClaims::new(conn, base, timeout))
    }

    pub(super) fn memory(claims: Arc<MemoryClaims>, base: String) -> Self {
        ClaimStore::Memory { claims, base }
    }

    /// Takes `key` for `hold` if nobody holds it, tagged `tag`.
    pub(crate) async fn claim(&self, key: &str, tag: &str, hold: Duration) -> Result<Claim, Error> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        match self {
            ClaimStore::Redis(redis) => redis.claim(key, token, tag, hold).await,
            ClaimStore::Memory { claims, base } => {
                Ok(claims.claim(&format!("{base}{key}"), token, tag, hold))
            }
        }
    }

    /// Keeps `outcome` for `keep`, if `token` still holds `key`.
    pub(crate) async fn complete(
        &self,
        key: &str,
        token: &ClaimToken,
        outcome: &[u8],
        keep: Duration,
    ) -> Result<bool, Error> {
        match self {
            ClaimStore::Redis(redis) => redis.complete(key, &token.0, outcome, keep).await,
            ClaimStore::Memory { claims, base } => {
                Ok(claims.complete(&format!("{base}{key}"), &token.0, outcome, keep))
            }
        }
    }

    /// Holds `key` for another `hold` from now, if `token` still holds it.
    pub(crate) async fn extend(
        &self,
        key: &str,
        token: &ClaimToken,
        hold: Duration,
    ) -> Result<bool, Error> {
        match self {
            ClaimStore::Redis(redis) => redis.extend(key, &token.0, hold).await,
            ClaimStore::Memory { claims, base } => {
                Ok(claims.extend(&format!("{base}{key}"), &token.0, hold))
            }
        }
    }

    /// Counts one more under `bucket` in a window of `window`.
    pub(crate) async fn count(
        &self,
        bucket: &str,
        window: Duration,
    ) -> Result<(u64, Duration), Error> {
        match self {
            ClaimStore::Redis(redis) => redis.count(bucket, window).await,
            ClaimStore::Memory { claims, base } => {
                Ok(claims.count(&format!("{base}{bucket}"), window))
            }
        }
    }

    /// Frees `key` without an outcome, if `token` still holds it.
    pub(crate) async fn release(&self, key: &str, token: &ClaimToken) -> Result<bool, Error> {
        match self {
            ClaimStore::Redis(redis) => redis.release(key, &token.0).await,
            ClaimStore::Memory { claims, base } => {
                Ok(claims.release(&format!("{base}{key}"), &token.0))
            }
        }
    }

    /// The namespace's prefix of every key (`<prefix>:<namespace>:`).
    pub(crate) fn base(&self) -> &str {
        match self {
            ClaimStore::Redis(redis) => redis.base(),
            ClaimStore::Memory { base, .. } => base,
        }
    }
}
