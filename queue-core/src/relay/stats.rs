//! What a relay has done.

use std::sync::atomic::AtomicU64;

/// What a relay has done since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayStats {
    /// Rows whose job Redis acknowledged as new.
    pub added: u64,
    /// Rows whose job Redis already had (a row added again after a relay died, or a
    /// job id another producer used first). Nothing was added for them.
    pub duplicates: u64,
    /// Rows set aside because their job can never be added as it is.
    pub set_aside: u64,
    /// Times this relay could not add a row because of its own build or settings (a
    /// custom backoff it does not know, a payload over its limit, options it cannot
    /// read, Redis refusing the job) and left it, with the reason, for a relay that
    /// can: the row is taken again later, by any relay, backing off from 1 s to 1 min.
    pub deferred: u64,
}

/// The relay's counts as it works, read into [`RelayStats`].
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) added: AtomicU64,
    pub(super) duplicates: AtomicU64,
    pub(super) set_aside: AtomicU64,
    pub(super) deferred: AtomicU64,
}
