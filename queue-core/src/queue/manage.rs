//! Reading and managing a queue: getters, retry, promote, pause, drain, clean, obliterate.

use std::ops::Range;
use std::time::Duration;

use super::Queue;
use crate::error::Error;
use crate::job::{JobCounts, JobInfo, JobState};
use crate::options::job_id::could_be_job_id;
use crate::snapshot::JobLogs;

/// `start..end` (half-open) as BullMQ's inclusive `start, end`.
pub(super) fn inclusive(range: &Range<usize>) -> Option<(i64, i64)> {
    if range.is_empty() {
        return None;
    }
    let start = i64::try_from(range.start).unwrap_or(i64::MAX);
    let end = i64::try_from(range.end - 1).unwrap_or(i64::MAX);
    Some((start, end))
}

impl<T> Queue<T> {
    /// The job as stored, with its state read in the same transaction, or `None` if it
    /// does not exist (any more), or if `id` cannot name a job (a reserved key name such
    /// as `meta`, or an id with `:`: Redis is not asked). With an outbox, a job still
    /// waiting there is found too, [`JobState::Pending`] (see
    /// [`get_job_state`](Self::get_job_state)).
    pub async fn get_job(&self, id: &str) -> Result<Option<JobInfo>, Error> {
        if !could_be_job_id(id) {
            return Ok(None);
        }
        let in_redis = || self.timed("get_job", async { self.engine().await?.get_job(id).await });
        self.or_in_outbox(id, in_redis, |info| info).await
    }

    /// The job's state alone (a cheaper read than [`get_job`](Self::get_job)), or `None`
    /// if it does not exist (any more). With an outbox, a job still waiting there is
    /// [`JobState::Pending`] (or [`JobState::Failed`] when its row was set aside), so that
    /// a 202's `Location` never answers 404 for a job that is on its way.
    pub async fn get_job_state(&self, id: &str) -> Result<Option<JobState>, Error> {
        if !could_be_job_id(id) {
            return Ok(None);
        }
        let in_redis = || {
            self.timed("get_job_state", async {
                self.engine().await?.get_job_state(id).await
            })
        };
        // A job in the outbox always says its state there.
        self.or_in_outbox(id, in_redis, |info| info.state.unwrap_or(JobState::Pending))
            .await
    }

    /// The job and its state. [`get_job`](Self::get_job) answers both now: the job it
    /// returns carries its state ([`JobInfo::state`]).
    #[deprecated(
        since = "0.2.0",
        note = "use `get_job`: its `JobInfo::state` is read in the same transaction"
    )]
    pub async fn get_job_and_state(
        &self,
        id: &str,
    ) -> Result<Option<(JobInfo, Option<JobState>)>, Error> {
        Ok(self.get_job(id).await?.map(|info| {
            let state = info.state;
            (info, state)
        }))
    }

    /// The job as it waits in the app's outbox, its state there ([`JobState::Pending`],
    /// or [`JobState::Failed`] for a row set aside) in [`JobInfo::state`], without asking
    /// Redis; `None` when it is not there (or the app has no outbox). What a status
    /// answer can say while Redis is down: [`get_job`](Self::get_job) asks Redis first
    /// and waits up to the command timeout for it.
    pub async fn get_outbox_job(&self, id: &str) -> Result<Option<JobInfo>, Error> {
        if !could_be_job_id(id) {
            return Ok(None);
        }
        self.in_outbox(id).await
    }

    /// What `look` finds in Redis, else the job as it waits in the outbox. With Redis
    /// down, a job still in the outbox is answered all the same (only the outbox knows
    /// it anyway); a job in neither place is looked for in Redis once more, since the
    /// relay may have moved it between the two looks.
    async fn or_in_outbox<R, Fut>(
        &self,
        id: &str,
        look: impl Fn() -> Fut,
        from_outbox: impl Fn(JobInfo) -> R,
    ) -> Result<Option<R>, Error>
    where
        Fut: std::future::Future<Output = Result<Option<R>, Error>>,
    {
        let first = look().await;
        if !self.has_outbox() {
            return first;
        }
        match first {
            Ok(Some(found)) => Ok(Some(found)),
            Ok(None) => match self.in_outbox(id).await? {
                Some(info) => Ok(Some(from_outbox(info))),
                None => look().await,
            },
            Err(e) if e.is_unavailable() => match self.in_outbox(id).await {
                Ok(Some(info)) => Ok(Some(from_outbox(info))),
                _ => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    /// How many jobs are in each state.
    pub async fn get_job_counts(&self) -> Result<JobCounts, Error> {
        self.timed("get_job_counts", async {
            self.engine().await?.get_job_counts().await
        })
        .await
    }

    /// Jobs in the given states (all states when empty), newest first, paged by `range`.
    ///
    /// The range applies to each place a state's jobs are kept, as BullMQ's `getJobs`
    /// applies it to each state: waiting jobs are the wait list's, a paused queue's and
    /// the grouped jobs waiting their turn in their groups, so `0..10` of waiting jobs
    /// may give up to 10 of each. For one position across all waiting jobs, read
    /// [`get_job_summaries`](Self::get_job_summaries).
    pub async fn get_jobs(
        &self,
        states: &[JobState],
        range: Range<usize>,
    ) -> Result<Vec<JobInfo>, Error> {
        let Some((start, end)) = inclusive(&range) else {
            return Ok(Vec::new());
        };
        self.timed("get_jobs", async {
            self.engine().await?.get_jobs(states, start, end).await
        })
        .await
    }

    /// Log lines of a job, oldest first, paged by `range`. None for an id that cannot
    /// name a job ([`could_be_job_id`]).
    pub async fn get_job_logs(&self, id: &str, range: Range<usize>) -> Result<JobLogs, Error> {
        let (Some((start, end)), true) = (inclusive(&range), could_be_job_id(id)) else {
            return Ok(JobLogs {
                lines: Vec::new(),
                total: 0,
            });
        };
        let to_isize = |n: i64| isize::try_from(n).unwrap_or(isize::MAX);
        let logs = async {
            self.engine()
                .await?
                .get_job_logs(id, to_isize(start), to_isize(end))
                .await
        };
        let (lines, total) = self.timed("get_job_logs", logs).await?;
        Ok(JobLogs { lines, total })
    }

    /// Removes a job that is not running. `Ok(false)` when a worker holds it (use
    /// [`cancel`](Queue::cancel) for a running job); `Ok(true)` also when it did not exist.
    /// An id that cannot name a job ([`could_be_job_id`]) removes
    /// nothing: BullMQ would delete whatever key it names (`meta`: the queue's pause flag;
    /// `repeat:<scheduler>`: a scheduler's definition).
    pub async fn remove(&self, id: &str) -> Result<bool, Error> {
        if !could_be_job_id(id) {
            return Ok(true);
        }
        self.timed("remove", async { self.engine().await?.remove(id).await })
            .await
    }

    /// Moves a failed job back to waiting, for a new round of attempts: its attempt
    /// counters start again from zero, so the job gets all its attempts (and backoff)
    /// again, and reads as this round's (`1 / 5` after a first failure, never `6 / 5`).
    /// BullMQ's own retry keeps the counters, which gives a job that used its attempts
    /// a single one more.
    pub async fn retry(&self, id: &str) -> Result<(), Error> {
        self.expect_state(id, JobState::Failed, "retry").await?;
        self.timed("retry", async { self.engine().await?.retry(id).await })
            .await
    }

    /// Moves every failed job back to waiting, each for a new round of attempts as
    /// [`retry`](Queue::retry) does (one job at a time, oldest first: for many failed
    /// jobs this takes a while).
    pub async fn retry_failed(&self) -> Result<(), Error> {
        self.timed("retry_failed", async {
            self.engine().await?.retry_failed().await
        })
        .await
    }

    /// Runs a delayed job now.
    pub async fn promote(&self, id: &str) -> Result<(), Error> {
        self.expect_state(id, JobState::Delayed, "promote").await?;
        self.timed("promote", async { self.engine().await?.promote(id).await })
            .await
    }

    /// Runs every delayed job now.
    pub async fn promote_all(&self) -> Result<(), Error> {
        self.timed("promote_all", async {
            self.engine().await?.promote_all().await
        })
        .await
    }

    /// Stops every worker (in every process) from starting jobs of this queue.
    /// Running jobs finish; adds still work.
    pub async fn pause(&self) -> Result<(), Error> {
        self.timed("pause", async { self.engine().await?.pause().await })
            .await
    }

    /// Lets workers start jobs again.
    pub async fn resume(&self) -> Result<(), Error> {
        self.timed("resume", async { self.engine().await?.resume().await })
            .await
    }

    /// Whether the queue is paused.
    pub async fn is_paused(&self) -> Result<bool, Error> {
        self.timed("is_paused", async {
            self.engine().await?.is_paused().await
        })
        .await
    }

    /// Removes every waiting (and prioritized) job, and the delayed ones too if asked.
    /// Running and finished jobs stay.
    pub async fn drain(&self, include_delayed: bool) -> Result<(), Error> {
        self.timed("drain", async {
            self.engine().await?.drain(include_delayed).await
        })
        .await
    }

    /// Removes up to `limit` jobs (0: no limit) in `state` that are older than `grace`;
    /// returns their ids.
    pub async fn clean(
        &self,
        grace: Duration,
        limit: u32,
        state: JobState,
    ) -> Result<Vec<String>, Error> {
        if state == JobState::Pending {
            return Err(Error::invalid(
                "state",
                "pending jobs are in the application's outbox, not in Redis; see Outbox::pending",
            ));
        }
        self.timed("clean", async {
            self.engine().await?.clean(grace, limit, state).await
        })
        .await
    }

    /// Deletes the queue and all its jobs from Redis. Refused while jobs are active,
    /// unless `force`.
    pub async fn obliterate(&self, force: bool) -> Result<(), Error> {
        self.timed("obliterate", async {
            self.engine().await?.obliterate(force).await
        })
        .await
    }

    async fn expect_state(
        &self,
        id: &str,
        expected: JobState,
        operation: &'static str,
    ) -> Result<(), Error> {
        match self.get_job_state(id).await? {
            Some(state) if state == expected => Ok(()),
            Some(state) => Err(Error::WrongState {
                queue: self.name().to_owned(),
                id: id.to_owned(),
                state: state.to_string(),
                operation,
            }),
            None => Err(Error::JobNotFound {
                queue: self.name().to_owned(),
                id: id.to_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::inclusive;

    #[test]
    fn ranges_become_inclusive() {
        assert_eq!(inclusive(&(0..10)), Some((0, 9)));
        assert_eq!(inclusive(&(5..6)), Some((5, 5)));
        assert_eq!(inclusive(&(3..3)), None);
    }
}
