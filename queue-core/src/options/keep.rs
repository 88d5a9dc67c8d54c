//! Retention of finished jobs: how many completed or failed jobs Redis keeps.

use std::time::Duration;

/// Which finished jobs to keep, for `remove_on_complete` and `remove_on_fail`.
///
/// ```
/// use std::time::Duration;
/// use queue_core::{JobOptions, Retention};
///
/// let opts = JobOptions::new()
///     .remove_on_complete(Retention::Last(100))
///     .remove_on_fail(Retention::Age(Duration::from_secs(7 * 24 * 3600)));
/// assert!(opts.validate().is_ok());
/// ```
///
/// When neither the job nor the app's default job options say, the app's workers keep
/// completed jobs by [`Retention::DEFAULT_COMPLETED`] and failed ones by [`Retention::DEFAULT_FAILED`]
/// (as BullMQ's worker-level retention, so the job itself stores nothing for it), and
/// Redis memory stays bounded under any load. (BullMQ itself keeps everything.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
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

impl Retention {
    /// Completed jobs kept by default: the last 1,000. Enough to look at recent work on
    /// a dashboard; results a caller needs for longer belong in a database.
    ///
    /// A count, not a count and an age: BullMQ stores an age as an object in the job's
    /// options, which then no longer fit Redis's compact hash encoding, and every
    /// waiting job would take 2.4 times the memory (measured in `docs/benchmarks/2026-12-02.md`).
    pub const DEFAULT_COMPLETED: Retention = Retention::Last(1_000);

    /// Failed jobs kept by default: the last 10,000, as a dead-letter set to inspect
    /// and retry from.
    pub const DEFAULT_FAILED: Retention = Retention::Last(10_000);
}
