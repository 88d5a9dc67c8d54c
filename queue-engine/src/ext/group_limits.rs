//! A group's limits, plain data: what the worker's options carry (`WorkerOptions::groups`)
//! and the scripts enforce (change 21). A leaf apart from `groups.rs`, which uses the
//! options: the options name these without a circle.

/// Limits applied to each group: at most `concurrency` of its jobs active at once,
/// and at most `rate.max` started per `rate.duration_ms`, across all workers.
///
/// ```
/// use bullmq::groups::{GroupLimits, GroupRate};
///
/// let limits = GroupLimits {
///     concurrency: Some(2),
///     rate: Some(GroupRate { max: 10, duration_ms: 1_000 }),
/// };
/// assert_eq!(limits.concurrency, Some(2));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupLimits {
    /// At most this many active jobs per group (`None`: no limit).
    pub concurrency: Option<u32>,
    /// At most this many starts per window per group (`None`: no limit).
    pub rate: Option<GroupRate>,
}

/// A rate limit: `max` starts per `duration_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupRate {
    /// Starts allowed in one window.
    pub max: u64,
    /// The window, in milliseconds.
    pub duration_ms: u64,
}
