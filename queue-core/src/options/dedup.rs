//! Deduplication: at most one job per deduplication id while the id is held.

use std::time::Duration;

/// BullMQ's deduplication: while a job with this id is waiting, delayed or active
/// (or until `ttl` elapses), adding another job with the same id adds nothing.
///
/// Unlike a custom job id, the deduplicated job keeps an automatic id, and the hold
/// ends when the job finishes (or after `ttl`), so the same id can be used again later.
///
/// ```
/// use std::time::Duration;
/// use queue_core::{options::Deduplication, JobOptions};
///
/// let opts = JobOptions::new().deduplication(Deduplication::new("report-7").ttl(Duration::from_secs(60)));
/// assert!(opts.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a deduplication does nothing until it is given to `JobOptions::deduplication`"]
pub struct Deduplication {
    pub(crate) id: String,
    pub(crate) ttl: Option<Duration>,
    pub(crate) extend: bool,
    pub(crate) replace: bool,
}

impl Deduplication {
    /// Deduplicate on `id` until the job finishes.
    pub fn new(id: impl Into<String>) -> Self {
        Deduplication {
            id: id.into(),
            ttl: None,
            extend: false,
            replace: false,
        }
    }

    /// Hold the id for this long only (throttle mode).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Restart the `ttl` each time a duplicate arrives (debounce mode).
    pub fn extend(mut self) -> Self {
        self.extend = true;
        self
    }

    /// Replace the data of a still-delayed job with the newest one (debounce mode).
    pub fn replace(mut self) -> Self {
        self.replace = true;
        self
    }

    /// The deduplication id.
    pub fn id(&self) -> &str {
        &self.id
    }
}
