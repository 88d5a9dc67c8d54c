//! A snapshot of a job as stored in Redis, for status pages and management.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;

use super::JobState;
use crate::encryption::sealed_with;

/// A job read back from Redis: what a status page or an operator needs.
///
/// The payload is kept as JSON; [`JobInfo::data_as`] turns it into a type.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct JobInfo {
    /// The job id.
    pub id: String,
    /// The job name (the handler it is dispatched to).
    pub name: String,
    /// The payload, as stored.
    pub data: serde_json::Value,
    /// The last reported progress (`0` when never reported).
    pub progress: serde_json::Value,
    /// Attempts that have finished (failed or completed).
    pub attempts_made: u32,
    /// Attempts that have started (including a running one or one lost to a crash).
    pub attempts_started: u32,
    /// Attempts allowed in total.
    pub max_attempts: u32,
    /// When the job was added (ms since the Unix epoch).
    pub timestamp_ms: u64,
    /// When the last attempt started (ms since the Unix epoch).
    pub processed_on_ms: Option<u64>,
    /// When the job finished (ms since the Unix epoch).
    pub finished_on_ms: Option<u64>,
    /// The failure reason of the last failed attempt.
    pub failed_reason: Option<String>,
    /// The handler's return value, for a completed job.
    pub return_value: Option<serde_json::Value>,
    /// The current delay (set by `delay` or by a retry backoff).
    pub delay: Duration,
    /// The priority (0 when none).
    pub priority: u32,
    /// The options it was added with, as stored (the trace context among them).
    pub options: crate::options::JobOptions,
    /// What each failed attempt recorded, oldest first, one entry per failure (the last
    /// ten, or the job's `stack_trace_limit`): the attempt's reason on the first line,
    /// then its error chain or where the handler panicked. Node BullMQ workers record
    /// the same field (their `err.stack`), so Bull Board shows ours and we show theirs.
    pub stacktrace: Vec<String>,
    /// When a delayed job is due to run, in ms since the Unix epoch: a job added with a
    /// delay, or a retry waiting out its backoff. Read by
    /// [`Queue::get_job`](crate::Queue::get_job) (from the delayed set, which the job's
    /// hash does not say); `None` in listings.
    pub runs_at_ms: Option<u64>,
    /// The job whose child this is, in a flow.
    pub parent: Option<ParentJob>,
    /// The job's state, read with its fields in one transaction by
    /// [`Queue::get_job`](crate::Queue::get_job), so that the two agree (two separate
    /// reads can pair `completed` with the fields of a moment before). In a listing of
    /// one state, that state; `None` where it was not read.
    pub state: Option<JobState>,
}

/// A flow parent, as a child's hash names it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParentJob {
    /// The parent's queue, as its Redis key prefix: `<prefix>:<queue>`.
    pub queue_key: String,
    /// The parent's job id.
    pub id: String,
}

impl ParentJob {
    /// The parent's queue name: what follows the last `:` of its key prefix (a queue
    /// name has none).
    pub fn queue(&self) -> &str {
        self.queue_key.rsplit(':').next().unwrap_or(&self.queue_key)
    }
}

impl JobInfo {
    /// The payload as `D`. A sealed payload ([`encryption`](crate::encryption)) is
    /// refused, saying so: open the job with [`Queue::open`](crate::Queue::open) first.
    pub fn data_as<D: DeserializeOwned>(&self) -> Result<D, serde_json::Error> {
        if let Some(key) = sealed_with(&self.data) {
            return Err(serde::de::Error::custom(format_args!(
                "the payload is sealed (key `{key}`): open the job with Queue::open first"
            )));
        }
        serde_json::from_value(self.data.clone())
    }

    /// The id of the key that sealed this job's payload or return value, when one is
    /// sealed ([`encryption`](crate::encryption)); what a page that shows the job says
    /// in place of the payload.
    pub fn sealed_with(&self) -> Option<&str> {
        sealed_with(&self.data).or_else(|| self.return_value.as_ref().and_then(sealed_with))
    }

    /// When the job was added.
    pub fn timestamp(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.timestamp_ms)
    }
}
