//! Job schedulers: a job added on a cron pattern or at a fixed interval, by Redis, for
//! every process at once (BullMQ's `upsertJobScheduler`).

use std::time::Duration;

use serde::Serialize;

use super::Queue;
use crate::error::Error;
use crate::options::JobOptions;

/// When a scheduler adds its job.
///
/// ```
/// use queue_core::Schedule;
/// let daily = Schedule::cron("5 0 * * *").tz("Europe/Paris"); // 00:05 Paris time
/// # let _ = daily;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub(crate) cron: Option<String>,
    pub(crate) every: Option<Duration>,
    pub(crate) tz: Option<String>,
}

impl Schedule {
    /// A cron pattern, five fields (minute first) or six (seconds first).
    pub fn cron(pattern: impl Into<String>) -> Self {
        Schedule {
            cron: Some(pattern.into()),
            every: None,
            tz: None,
        }
    }

    /// Every `interval`.
    pub fn every(interval: Duration) -> Self {
        Schedule {
            cron: None,
            every: Some(interval),
            tz: None,
        }
    }

    /// The IANA time zone the cron pattern is read in (default UTC).
    pub fn tz(mut self, tz: impl Into<String>) -> Self {
        self.tz = Some(tz.into());
        self
    }
}

impl<T: Serialize> Queue<T> {
    /// Creates or updates the scheduler `id`: it adds a job named `name` with `data`
    /// and `options` on `schedule`. Idempotent: calling it again with the same id (a
    /// restart, three replicas at once) keeps one scheduler and one next job.
    pub async fn upsert_scheduler(
        &self,
        id: &str,
        schedule: Schedule,
        name: &str,
        data: T,
        options: JobOptions,
    ) -> Result<(), Error> {
        if id.is_empty() || id.contains(':') {
            return Err(Error::invalid(
                "scheduler id",
                format!("`{id}` must be non-empty and without ':'"),
            ));
        }
        if schedule.every.is_some_and(|d| d.is_zero()) {
            return Err(Error::invalid(
                "schedule",
                "an interval must be longer than zero",
            ));
        }
        let mut options = self.prepare(options)?;
        // Scheduled jobs are added by Redis, not by `add`: there is nowhere to keep extras.
        options.trace_id = None;
        if options.timeout.is_some() {
            return Err(Error::invalid(
                "timeout",
                "a per-job timeout cannot travel with scheduled jobs; set it on the processor instead",
            ));
        }
        if options.job_id.is_some() {
            return Err(Error::invalid(
                "job_id",
                "a scheduler names its jobs itself; leave job_id unset",
            ));
        }
        let data = self.to_json(&data)?;
        let work = async {
            self.engine()
                .await?
                .upsert_scheduler(id, &schedule, name, data, &options)
                .await
        };
        self.timed("upsert_scheduler", work).await
    }
}

impl<T> Queue<T> {
    /// How many schedulers the queue has.
    pub async fn scheduler_count(&self) -> Result<u64, Error> {
        self.timed("scheduler_count", async {
            self.engine().await?.scheduler_count().await
        })
        .await
    }

    /// Removes the scheduler `id` (and its next job); `false` when there was none.
    pub async fn remove_scheduler(&self, id: &str) -> Result<bool, Error> {
        self.timed("remove_scheduler", async {
            self.engine().await?.remove_scheduler(id).await
        })
        .await
    }
}
