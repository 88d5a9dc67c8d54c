//! What reading a queue answers, beyond a job itself ([`JobInfo`](crate::job::JobInfo)):
//! listing rows and bounded searches, log pages, a parent's children, the workers,
//! limits and schedulers of a queue. Plain data, filled by the engine and handed on by
//! the queue's readers.

mod listing;
mod queue;

pub use listing::{JobFilter, JobScan, JobSummary, ScanLimits};
pub use queue::{ChildJob, Children, GlobalLimits, PerMinuteSeries, SchedulerInfo, WorkerInfo};

/// A page of a job's log lines.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobLogs {
    /// The lines asked for, oldest first.
    pub lines: Vec<String>,
    /// How many lines the job has in all.
    pub total: usize,
}
