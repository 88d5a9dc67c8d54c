//! Batches (change 36): a worker whose processor takes many jobs at once.
//!
//! Redis, not the worker, limits how fast jobs go: an ungrouped job costs 24 commands
//! in its take and finish, and Redis is busy all the time at concurrency 10 and more.
//! A batch worker takes up to [`BatchOptions::size`](crate::batch::BatchOptions::size) jobs in one script call
//! (`batchTake`, upstream's `moveToActive` checks, then many jobs taken) and completes
//! them in one (`batchFinish`, with upstream's `moveToFinished` helpers): about 7
//! commands a job. The jobs are BullMQ's ordinary jobs on its ordinary keys: each is
//! locked under the batch's token, moves wait → active → completed or failed, and
//! emits its own events; a failure, a retry or a flow's child is finished by
//! upstream's scripts, one job at a time, exactly as a single-job worker's is.
//!
//! ```no_run
//! # async fn demo() -> bullmq::Result<()> {
//! use std::sync::Arc;
//! use bullmq::batch::{BatchOptions, BatchProcessorFn};
//! use bullmq::{Worker, WorkerOptions};
//!
//! let processor: BatchProcessorFn = Arc::new(|jobs| {
//!     Box::pin(async move {
//!         // One outcome per job, in the order given.
//!         jobs.iter().map(|(job, _cancel)| Ok(serde_json::json!(job.id()))).collect()
//!     })
//! });
//! let options = WorkerOptions {
//!     batch: Some(BatchOptions::new(100, 20, processor)),
//!     ..WorkerOptions::default()
//! };
//! let worker = Worker::with_options("emails", BatchOptions::unused_processor(), options).await?;
//! # let _ = worker; Ok(()) }
//! ```

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::error::Error;
use crate::job::Job;
use crate::worker::CancellationToken;

/// The most jobs one batch may hold: a batch's job ids go through Lua's `unpack`,
/// whose stack holds 8,000 values, twice for some commands.
pub const MAX_BATCH_SIZE: usize = 1_000;

/// A batch processor: the batch's jobs, each with its cancellation token, in; one
/// outcome per job, in the same order, out. A job without an outcome (a shorter
/// list) fails its attempt, saying so.
pub type BatchProcessorFn = Arc<
    dyn Fn(
            Vec<(Job, CancellationToken)>,
        ) -> BoxFuture<'static, Vec<Result<serde_json::Value, Error>>>
        + Send
        + Sync,
>;

/// How a worker takes its jobs in batches ([`crate::WorkerOptions::batch`]).
#[derive(Clone)]
pub struct BatchOptions {
    /// The most jobs in one batch, 1 to [`MAX_BATCH_SIZE`].
    pub size: usize,
    /// How long a batch that is not full waits for more jobs after its first, in
    /// milliseconds (0: it runs with what it found).
    pub wait_ms: u64,
    /// What runs the batch's jobs.
    pub processor: BatchProcessorFn,
}

impl BatchOptions {
    /// Batches of up to `size` jobs, waiting up to `wait_ms` after the first job for
    /// the rest, run by `processor`.
    pub fn new(size: usize, wait_ms: u64, processor: BatchProcessorFn) -> Self {
        BatchOptions {
            size,
            wait_ms,
            processor,
        }
    }

    /// The single-job processor a batch worker is created with: never called, since
    /// every job goes to the batch processor.
    pub fn unused_processor() -> crate::worker::ProcessorFn {
        Arc::new(|job, _token| {
            Box::pin(async move {
                Err(Error::InvalidConfig(format!(
                    "job {} reached the single-job processor of a batch worker",
                    job.id()
                )))
            })
        })
    }

    /// Refuses a size out of range, a wait longer than half the lock (the first jobs
    /// are locked, and not renewed by the engine, while the batch fills), or batches
    /// combined with groups.
    pub(crate) fn check(&self, grouped: bool, lock_duration_ms: u64) -> Result<(), Error> {
        if self.size == 0 || self.size > MAX_BATCH_SIZE {
            return Err(Error::InvalidConfig(format!(
                "a batch's size must be 1 to {MAX_BATCH_SIZE}, not {}",
                self.size
            )));
        }
        if self.wait_ms > lock_duration_ms / 2 {
            return Err(Error::InvalidConfig(format!(
                "a batch's wait ({} ms) must be at most half the lock duration ({lock_duration_ms} ms)",
                self.wait_ms
            )));
        }
        if grouped {
            return Err(Error::InvalidConfig(
                "a worker cannot take batches by group yet: a batch's jobs would each need \
                 their group's slot and rate; use batches or groups on a queue, not both"
                    .to_owned(),
            ));
        }
        Ok(())
    }
}

impl std::fmt::Debug for BatchOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchOptions")
            .field("size", &self.size)
            .field("wait_ms", &self.wait_ms)
            .finish_non_exhaustive()
    }
}
