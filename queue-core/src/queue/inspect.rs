//! What an operator's view reads beyond jobs and counts: the workers connected, the
//! queue's global limits, its job schedulers, BullMQ's per-minute figures, and jobs
//! oldest first.

use std::ops::Range;

use super::Queue;
use crate::error::Error;
use crate::job::{JobInfo, JobState};
use crate::snapshot::{Children, GlobalLimits, PerMinuteSeries, SchedulerInfo, WorkerInfo};

impl<T> Queue<T> {
    /// Jobs in the given states (all states when empty), oldest first, paged by `range`.
    pub async fn get_jobs_oldest_first(
        &self,
        states: &[JobState],
        range: Range<usize>,
    ) -> Result<Vec<JobInfo>, Error> {
        let Some((start, end)) = super::manage::inclusive(&range) else {
            return Ok(Vec::new());
        };
        self.timed("get_jobs", async {
            self.engine()
                .await?
                .get_jobs_ordered(states, start, end, true)
                .await
        })
        .await
    }

    /// The workers connected to this queue (empty where the Redis provider hides
    /// `CLIENT LIST`).
    pub async fn get_workers(&self) -> Result<Vec<WorkerInfo>, Error> {
        self.timed("get_workers", async {
            self.engine().await?.get_workers().await
        })
        .await
    }

    /// The queue's global concurrency and rate limit, where set.
    pub async fn get_global_limits(&self) -> Result<GlobalLimits, Error> {
        self.timed("get_global_limits", async {
            self.engine().await?.get_global_limits().await
        })
        .await
    }

    /// The queue's job schedulers, soonest next run first, paged by `range`.
    pub async fn get_schedulers(&self, range: Range<usize>) -> Result<Vec<SchedulerInfo>, Error> {
        let Some((start, end)) = super::manage::inclusive(&range) else {
            return Ok(Vec::new());
        };
        self.timed("get_schedulers", async {
            self.engine().await?.get_schedulers(start, end).await
        })
        .await
    }

    /// The scheduler `id`, if the queue has it.
    pub async fn get_scheduler(&self, id: &str) -> Result<Option<SchedulerInfo>, Error> {
        self.timed("get_scheduler", async {
            self.engine().await?.get_scheduler(id).await
        })
        .await
    }

    /// The flow children of job `id`: up to `limit` of the pending and of the processed
    /// ones, and how many of each there are.
    pub async fn get_children(&self, id: &str, limit: usize) -> Result<Children, Error> {
        if limit == 0 || !crate::options::job_id::could_be_job_id(id) {
            return Ok(Children::default());
        }
        self.timed("get_children", async {
            self.engine().await?.get_children(id, limit).await
        })
        .await
    }

    /// BullMQ's per-minute counts of `outcome` for the last `minutes` minutes, the
    /// current minute (so far) first: what workers record when
    /// [`Processor::per_minute_metrics`](crate::Processor::per_minute_metrics) is on
    /// (empty otherwise).
    pub async fn get_per_minute(
        &self,
        outcome: PerMinuteSeries,
        minutes: usize,
    ) -> Result<Vec<u64>, Error> {
        if minutes == 0 {
            return Ok(Vec::new());
        }
        self.timed("get_per_minute", async {
            self.engine().await?.get_per_minute(outcome, minutes).await
        })
        .await
    }
}
