//! When a job scheduler adds its job.

use std::time::Duration;

/// When a scheduler adds its job, and what becomes of a run no worker was there for.
///
/// ```
/// use std::time::Duration;
/// use queue_core::options::{MissedRuns, Schedule};
/// let daily = Schedule::cron("5 0 * * *").tz("Europe/Paris"); // 00:05 Paris time
/// let hourly = Schedule::cron("0 * * * *")
///     .missed_runs(MissedRuns::Skip { grace: Duration::from_secs(300) });
/// # let _ = (daily, hourly);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a schedule does nothing until it is given to `upsert_scheduler`"]
pub struct Schedule {
    pub(crate) cron: Option<String>,
    pub(crate) every: Option<Duration>,
    pub(crate) tz: Option<String>,
    pub(crate) missed: MissedRuns,
}

/// What a scheduler does with runs that fell due while no worker ran (a deploy, an
/// outage, a night with the workers scaled to zero).
///
/// A scheduler keeps one next run in Redis, so however many runs were missed, at most
/// one is owed when a worker returns; upserting the scheduler again at start-up keeps
/// it (a run already due is not replaced by the next one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MissedRuns {
    /// The owed run happens once, as soon as a worker can take it; the next one is at
    /// the schedule's next time after it. For work that covers "everything since the
    /// last run" (a daily scan that keeps its own watermark), nothing is lost.
    #[default]
    RunOnce,
    /// A run that cannot start within `grace` of its time is skipped: its handler is
    /// not called, the job completes with a `null` result, and an `info` log says so.
    /// Only a run's first start is judged: a retry waits for its backoff, not for a
    /// worker, and a run recovered after its worker died has begun its work. A run late
    /// because the workers were busy is skipped too.
    Skip {
        /// How late a run may start and still run.
        grace: Duration,
    },
}

impl Schedule {
    /// A cron pattern, five fields (minute first) or six (seconds first).
    pub fn cron(pattern: impl Into<String>) -> Self {
        Schedule {
            cron: Some(pattern.into()),
            every: None,
            tz: None,
            missed: MissedRuns::RunOnce,
        }
    }

    /// Every `interval`.
    pub fn every(interval: Duration) -> Self {
        Schedule {
            cron: None,
            every: Some(interval),
            tz: None,
            missed: MissedRuns::RunOnce,
        }
    }

    /// The IANA time zone the cron pattern is read in (default UTC).
    pub fn tz(mut self, tz: impl Into<String>) -> Self {
        self.tz = Some(tz.into());
        self
    }

    /// What happens to runs that fell due while no worker ran (default:
    /// [`MissedRuns::RunOnce`]).
    pub fn missed_runs(mut self, missed: MissedRuns) -> Self {
        self.missed = missed;
        self
    }
}
