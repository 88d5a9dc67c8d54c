//! How a wait for a job ended.

use serde::de::DeserializeOwned;

use crate::error::Error;

/// How a wait for a job ended.
///
/// ```no_run
/// # async fn demo(added: queue_core::AddedJob) -> queue_core::Result<()> {
/// use std::time::Duration;
/// use queue_core::JobOutcome;
///
/// match added.wait(Duration::from_secs(5)).await? {
///     JobOutcome::Completed(output) => println!("done: {output}"),
///     JobOutcome::Failed { reason } => println!("failed for good: {reason}"),
///     JobOutcome::TimedOut => println!("still running; look again later"),
///     JobOutcome::Gone => println!("removed before its outcome was read"),
///     _ => {}
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobOutcome<O> {
    /// The job completed: what its handler returned.
    Completed(O),
    /// The job failed for good (no retry follows).
    Failed {
        /// The failure's text.
        reason: String,
    },
    /// The job had not finished when the wait ended.
    TimedOut,
    /// The job is not in Redis (nor in the app's outbox): removed (by retention, for
    /// one) before its outcome could be read, or never added.
    Gone,
}

impl<O> JobOutcome<O> {
    /// Whether the job finished (completed or failed).
    pub fn is_finished(&self) -> bool {
        matches!(self, JobOutcome::Completed(_) | JobOutcome::Failed { .. })
    }

    pub(crate) fn try_map<P, E>(
        self,
        f: impl FnOnce(O) -> Result<P, E>,
    ) -> Result<JobOutcome<P>, E> {
        Ok(match self {
            JobOutcome::Completed(output) => JobOutcome::Completed(f(output)?),
            JobOutcome::Failed { reason } => JobOutcome::Failed { reason },
            JobOutcome::TimedOut => JobOutcome::TimedOut,
            JobOutcome::Gone => JobOutcome::Gone,
        })
    }
}

/// A finished job's output, read as `O`.
pub(crate) fn typed<O: DeserializeOwned>(output: serde_json::Value) -> Result<O, Error> {
    serde_json::from_value(output).map_err(|source| Error::Serialize {
        what: "the job's output",
        source,
    })
}
