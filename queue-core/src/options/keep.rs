//! Retention of finished jobs: how many completed or failed jobs Redis keeps.

use std::time::Duration;

/// Which finished jobs to keep, for `remove_on_complete` and `remove_on_fail`.
///
/// ```
/// use std::time::Duration;
/// use queue_core::{JobOptions, Keep};
///
/// let opts = JobOptions::new()
///     .remove_on_complete(Keep::Last(100))
///     .remove_on_fail(Keep::Age(Duration::from_secs(7 * 24 * 3600)));
/// assert!(opts.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Keep every finished job (Redis grows until something cleans it).
    All,
    /// Remove the job as soon as it finishes.
    None,
    /// Keep the newest `n` finished jobs.
    Last(usize),
    /// Keep finished jobs younger than this (whole seconds; BullMQ's resolution).
    Age(Duration),
    /// Keep at most `count` jobs, none older than `age`.
    LastWithin {
        /// Maximum number kept.
        count: usize,
        /// Maximum age kept.
        age: Duration,
    },
}
