//! A queue's surroundings as Redis holds them: the workers connected, its global
//! limits, its job schedulers, a flow parent's children, BullMQ's per-minute series.

use std::time::Duration;

/// A worker connected to a queue, from Redis's `CLIENT LIST` (BullMQ names every
/// worker connection after its queue; Node's and ours alike).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerInfo {
    /// The worker's own name, for a worker given one (BullMQ's `name` option).
    pub name: Option<String>,
    /// The connection's name as BullMQ sets it: `<prefix>:<queue in base64>`, then
    /// `:w:<name>` for a named worker.
    pub connection: String,
    /// Where it connects from.
    pub addr: String,
    /// How long it has been connected.
    pub age: Duration,
    /// How long since its last command.
    pub idle: Duration,
}

/// A queue's limits across every worker (BullMQ's global concurrency and rate limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GlobalLimits {
    /// At most this many jobs of the queue run at once, over all workers.
    pub concurrency: Option<u64>,
    /// At most `.0` jobs start per `.1`, over all workers.
    pub rate_limit: Option<(u64, Duration)>,
}

/// A job scheduler as stored.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SchedulerInfo {
    /// The scheduler's id.
    pub id: String,
    /// The name of the jobs it adds.
    pub job_name: String,
    /// Its cron pattern, if it has one.
    pub pattern: Option<String>,
    /// Its interval, if it has one.
    pub every: Option<Duration>,
    /// The time zone of the pattern.
    pub tz: Option<String>,
    /// When it adds its next job (ms since the Unix epoch).
    pub next_run_ms: Option<u64>,
    /// How many jobs it has added.
    pub iterations: u64,
}

impl SchedulerInfo {
    /// The id of the job it has waiting for its next run (BullMQ names it
    /// `repeat:<scheduler id>:<run time>`).
    pub fn next_job_id(&self) -> Option<String> {
        self.next_run_ms
            .map(|at| format!("repeat:{}:{at}", self.id))
    }
}

/// A flow child, as its parent's dependency sets name it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ChildJob {
    /// The child's queue.
    pub queue: String,
    /// The child's job id.
    pub id: String,
    /// What it returned, for a processed child.
    pub return_value: Option<serde_json::Value>,
}

/// A flow parent's children, pending and processed.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Children {
    /// Children not finished yet (the first ones, up to the limit asked for).
    pub pending: Vec<ChildJob>,
    /// How many are pending in all.
    pub pending_total: u64,
    /// Children that completed, with their return values (up to the limit).
    pub processed: Vec<ChildJob>,
    /// How many have completed in all.
    pub processed_total: u64,
    /// Children that failed for good (up to the limit): those whose failure the parent
    /// may pass (continue, ignore) with their reasons, and the one that failed it.
    pub failed: Vec<crate::job::FailedChild>,
    /// How many have failed in all.
    pub failed_total: u64,
}

impl Children {
    /// Whether the job has (or had) any children.
    pub fn is_empty(&self) -> bool {
        self.pending_total + self.processed_total + self.failed_total == 0
    }
}

/// Which of BullMQ's per-minute series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerMinuteSeries {
    /// Jobs completed.
    Completed,
    /// Jobs failed for good.
    Failed,
}
