//! Job states and per-state counts.

use std::fmt;

use crate::options::JobOptions;

/// Where a job is in its life, as BullMQ names it.
///
/// ```
/// use queue_core::JobState;
/// assert_eq!(JobState::WaitingChildren.as_str(), "waiting-children");
/// assert_eq!("delayed".parse::<JobState>().unwrap(), JobState::Delayed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum JobState {
    /// Ready to run, in arrival order.
    Waiting,
    /// Ready to run, ordered by priority.
    Prioritized,
    /// Waiting for its delay (or retry backoff) to pass.
    Delayed,
    /// A worker holds its lock and runs it.
    Active,
    /// Finished successfully.
    Completed,
    /// Finished with a failure after its last attempt (or an unrecoverable one).
    Failed,
    /// A parent job waiting for its children (flows).
    WaitingChildren,
    /// Written into the application's outbox (`Queue::add_in`, feature `sqlx`)
    /// and not yet added to Redis. Not a BullMQ state: no job in Redis has it.
    Pending,
}

impl JobState {
    /// The state a new job added with `options` starts in.
    pub(crate) fn initial(options: &JobOptions) -> JobState {
        if options.delay.is_some_and(|d| !d.is_zero()) {
            JobState::Delayed
        } else if options.priority.is_some_and(|p| p > 0) && options.group.is_none() {
            // A grouped job waits in its group, whatever its priority: waiting.
            JobState::Prioritized
        } else {
            JobState::Waiting
        }
    }

    /// Every state a job in Redis can have (BullMQ's), in the order a job usually goes
    /// through them. [`JobState::Pending`] is not among them.
    pub const ALL: [JobState; 7] = [
        JobState::Waiting,
        JobState::Prioritized,
        JobState::Delayed,
        JobState::Active,
        JobState::Completed,
        JobState::Failed,
        JobState::WaitingChildren,
    ];

    /// BullMQ's name for the state (`"waiting"`, `"waiting-children"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Waiting => "waiting",
            JobState::Prioritized => "prioritized",
            JobState::Delayed => "delayed",
            JobState::Active => "active",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::WaitingChildren => "waiting-children",
            JobState::Pending => "pending",
        }
    }

    /// Whether the job has finished (completed or failed).
    pub fn is_finished(self) -> bool {
        matches!(self, JobState::Completed | JobState::Failed)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for JobState {
    type Err = crate::error::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .or((s == "wait").then_some(JobState::Waiting))
            .or((s == "pending").then_some(JobState::Pending))
            .ok_or_else(|| {
                crate::error::Error::invalid(
                    "state",
                    format!(
                        "`{s}` is not a job state; expected one of {}",
                        state_names()
                    ),
                )
            })
    }
}

fn state_names() -> String {
    JobState::ALL.map(JobState::as_str).join(", ")
}

/// How many jobs a queue holds in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobCounts {
    /// Ready to run (including jobs held by a paused queue).
    pub waiting: u64,
    /// Ready to run, by priority.
    pub prioritized: u64,
    /// Waiting for a delay or a retry backoff.
    pub delayed: u64,
    /// Running now.
    pub active: u64,
    /// Finished successfully (and not yet removed by retention).
    pub completed: u64,
    /// Failed for good (and not yet removed by retention).
    pub failed: u64,
    /// Parents waiting for children.
    pub waiting_children: u64,
}

impl JobCounts {
    /// Every job in Redis, whatever its state.
    pub fn total(&self) -> u64 {
        self.waiting
            + self.prioritized
            + self.delayed
            + self.active
            + self.completed
            + self.failed
            + self.waiting_children
    }

    /// The count of one state; `0` for [`JobState::Pending`], which is not in Redis.
    ///
    /// ```
    /// use queue_core::{job::JobCounts, JobState};
    ///
    /// let counts = JobCounts { failed: 2, ..JobCounts::default() };
    /// assert_eq!(counts.of(JobState::Failed), 2);
    /// assert_eq!(counts.of(JobState::Pending), 0);
    /// ```
    pub fn of(&self, state: JobState) -> u64 {
        match state {
            JobState::Waiting => self.waiting,
            JobState::Prioritized => self.prioritized,
            JobState::Delayed => self.delayed,
            JobState::Active => self.active,
            JobState::Completed => self.completed,
            JobState::Failed => self.failed,
            JobState::WaitingChildren => self.waiting_children,
            JobState::Pending => 0,
        }
    }

    /// Jobs that have not finished yet.
    pub fn unfinished(&self) -> u64 {
        self.waiting + self.prioritized + self.delayed + self.active + self.waiting_children
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_new_job_starts_delayed_then_prioritized_then_waiting() {
        assert_eq!(JobState::initial(&JobOptions::new()), JobState::Waiting);
        assert_eq!(
            JobState::initial(&JobOptions::new().priority(3)),
            JobState::Prioritized
        );
        let delayed = JobOptions::new().priority(3).delay(Duration::from_secs(1));
        assert_eq!(JobState::initial(&delayed), JobState::Delayed);
    }
}
