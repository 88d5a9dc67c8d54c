//! How a queue's worker runs: what a [`Processor`](crate::Processor) sets, merged per
//! queue at start-up, and what the engine's worker is started with. One struct for the
//! three, so a setting is added in one place.

use std::time::Duration;

use crate::group::GroupLimits;

/// How long a cancelled handler gets to stop by itself before its future is dropped.
pub(crate) const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(5);

/// A queue's worker settings. `None` leaves a setting to BullMQ's default.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WorkerOptions {
    pub(crate) concurrency: usize,
    pub(crate) lock_duration: Option<Duration>,
    /// At most `.0` jobs per `.1` across the queue's workers.
    pub(crate) limiter: Option<(u64, Duration)>,
    /// Set when the queue's jobs are taken by group, with each group's limits.
    pub(crate) groups: Option<GroupLimits>,
    pub(crate) stalled_interval: Option<Duration>,
    pub(crate) max_stalled_count: Option<u32>,
    pub(crate) cancel_grace: Duration,
    /// Fail jobs with a name no handler takes at once, instead of as retryable.
    pub(crate) fail_unknown_names: bool,
    /// BullMQ's per-minute metrics: how many minutes to keep, when recorded.
    pub(crate) metrics_data_points: Option<usize>,
    /// The engine event channel's capacity, when a test asks for another.
    pub(crate) event_capacity: Option<usize>,
    /// Set when the queue's jobs run in batches (#46).
    pub(crate) batch: Option<Batching>,
}

/// How a queue's jobs are batched: at most `size` a batch, waiting up to `wait` after
/// the first job for the rest; the batch handler runs under `timeout` (its processor's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Batching {
    pub(crate) size: usize,
    pub(crate) wait: Duration,
    pub(crate) timeout: Option<Duration>,
}

/// The most jobs a batch may hold (the engine's bound).
pub(crate) const MAX_BATCH_SIZE: usize = 1_000;

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            concurrency: 1,
            lock_duration: None,
            limiter: None,
            groups: None,
            stalled_interval: None,
            max_stalled_count: None,
            cancel_grace: DEFAULT_CANCEL_GRACE,
            fail_unknown_names: false,
            metrics_data_points: None,
            event_capacity: None,
            batch: None,
        }
    }
}
