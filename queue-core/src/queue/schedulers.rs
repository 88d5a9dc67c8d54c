//! Job schedulers: a job added on a cron pattern or at a fixed interval, by Redis, for
//! every process at once (BullMQ's `upsertJobScheduler`).

use serde::Serialize;

use super::Queue;
use crate::error::Error;
use crate::options::{JobOptions, MissedRuns, Schedule};

impl<T: Serialize> Queue<T> {
    /// Creates or updates the scheduler `id`: it adds a job named `name` with `data`
    /// and `options` on `schedule`. Idempotent: calling it again with the same id (a
    /// restart, three replicas at once) keeps one scheduler and one next job, and a run
    /// that fell due while no worker ran stays owed ([`MissedRuns`]).
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
        options.skip_late = match schedule.missed {
            MissedRuns::RunOnce => None,
            MissedRuns::Skip { grace } if grace.is_zero() => {
                return Err(Error::invalid(
                    "missed_runs",
                    "a grace of zero would skip every run: give how late a run may start",
                ))
            }
            MissedRuns::Skip { grace } => Some(grace),
        };
        // Scheduled runs are not part of the trace that created the scheduler (or the
        // scheduler would tie every run for ever to one old request).
        options.trace = None;
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
