//! Acting on jobs and on the queue: remove, retry, promote, pause, drain, clean,
//! obliterate.

use std::time::Duration;

use super::EngineQueue;
use crate::backend::engine::convert::millis;

/// A retry by hand starts the job's attempts afresh.
const NEW_ROUND: bullmq::RetryOptions = bullmq::RetryOptions {
    reset_attempts_made: true,
    reset_attempts_started: true,
};
use crate::error::Error;
use crate::job::JobState;

impl EngineQueue {
    /// `false` when the job is locked by a worker.
    /// `false` when the job is locked by a worker. A grouped job waiting its turn leaves
    /// its group first (BullMQ's removal knows nothing of groups).
    pub(crate) async fn remove(&self, id: &str) -> Result<bool, Error> {
        self.inner
            .leave_group(id)
            .await
            .map_err(|e| self.error(e))?;
        self.inner.remove(id).await.map_err(|e| self.error(e))
    }

    /// Moves a failed job back to waiting with its attempt counters reset: a retry by
    /// hand is a new round of the job's attempts (BullMQ's default keeps the counters,
    /// and the job then fails after one attempt, reading `attemptsMade 6 / 5`).
    pub(crate) async fn retry(&self, id: &str) -> Result<(), Error> {
        let mut job = self.engine_job(id).await?;
        job.retry("failed", Some(NEW_ROUND))
            .await
            .map_err(|e| self.error(e))
    }

    /// [`retry`](Self::retry) for every job failed when it is called, oldest first, a
    /// page at a time (BullMQ's bulk retry, `moveJobsToWait`, cannot reset counters).
    /// A job that left `failed` meanwhile (retried or removed elsewhere) is skipped.
    pub(crate) async fn retry_failed(&self) -> Result<(), Error> {
        const PAGE: i64 = 500;
        let mut left = self
            .inner
            .get_job_count_by_types(&["failed"])
            .await
            .map_err(|e| self.error(e))?;
        while left > 0 {
            let page = self
                .inner
                .get_jobs(&["failed"], 0, PAGE.min(left as i64) - 1, true)
                .await
                .map_err(|e| self.error(e))?;
            if page.is_empty() {
                break;
            }
            for mut job in page {
                left = left.saturating_sub(1);
                if let Err(e) = job.retry("failed", Some(NEW_ROUND)).await {
                    let state = job.get_state().await.map_err(|e| self.error(e))?;
                    if state == bullmq::JobState::Failed {
                        return Err(self.error(e));
                    }
                }
            }
        }
        Ok(())
    }

    pub(crate) async fn promote(&self, id: &str) -> Result<(), Error> {
        self.engine_job(id)
            .await?
            .promote()
            .await
            .map_err(|e| self.error(e))
    }

    pub(crate) async fn promote_all(&self) -> Result<(), Error> {
        self.inner
            .promote_jobs(1000)
            .await
            .map_err(|e| self.error(e))
    }

    async fn engine_job(&self, id: &str) -> Result<bullmq::Job, Error> {
        self.inner
            .get_job(id)
            .await
            .map_err(|e| self.error(e))?
            .ok_or_else(|| Error::JobNotFound {
                queue: self.name().to_owned(),
                id: id.to_owned(),
            })
    }

    pub(crate) async fn pause(&self) -> Result<(), Error> {
        self.inner.pause().await.map_err(|e| self.error(e))
    }

    pub(crate) async fn resume(&self) -> Result<(), Error> {
        self.inner.resume().await.map_err(|e| self.error(e))
    }

    pub(crate) async fn is_paused(&self) -> Result<bool, Error> {
        self.inner.is_paused().await.map_err(|e| self.error(e))
    }

    pub(crate) async fn drain(&self, include_delayed: bool) -> Result<(), Error> {
        self.inner
            .drain(include_delayed)
            .await
            .map_err(|e| self.error(e))?;
        // Grouped jobs waiting their turn are drained too (they wait outside `wait`).
        self.inner
            .clear_groups(false)
            .await
            .map_err(|e| self.error(e))
    }

    pub(crate) async fn clean(
        &self,
        grace: Duration,
        limit: u32,
        state: JobState,
    ) -> Result<Vec<String>, Error> {
        let grace_ms = millis(grace);
        let set = match state {
            JobState::Waiting => "wait",
            other => other.as_str(),
        };
        let mut cleaned = self
            .inner
            .clean(grace_ms, limit, set)
            .await
            .map_err(|e| self.error(e))?;
        if state == JobState::Waiting {
            self.clean_grouped_waiting(grace_ms, limit, &mut cleaned)
                .await?;
        }
        Ok(cleaned)
    }

    /// Grouped jobs waiting their turn are waiting jobs too: cleaned, oldest first, up
    /// to what `limit` leaves (0: no limit, as BullMQ's clean).
    async fn clean_grouped_waiting(
        &self,
        grace_ms: u64,
        limit: u32,
        cleaned: &mut Vec<String>,
    ) -> Result<(), Error> {
        const PAGE: usize = 1000;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let before = now.saturating_sub(grace_ms);
        loop {
            let room = match limit {
                0 => PAGE,
                limit => (limit as usize).saturating_sub(cleaned.len()).min(PAGE),
            };
            if room == 0 {
                return Ok(());
            }
            let removed = self
                .inner
                .remove_grouped_waiting(room, Some(before))
                .await
                .map_err(|e| self.error(e))?;
            if removed.is_empty() {
                return Ok(());
            }
            cleaned.extend(removed);
        }
    }

    /// Like Node's `obliterate`: pauses the queue first (the script refuses a running
    /// queue) and refuses active jobs unless forced. The engine does neither: it pauses
    /// only when forced, and sends "0" for "not forced", which the script reads as forced.
    pub(crate) async fn obliterate(&self, force: bool) -> Result<(), Error> {
        if !force && self.get_job_counts().await?.active > 0 {
            return Err(Error::WrongState {
                queue: self.name().to_owned(),
                id: "*".to_owned(),
                state: "active".to_owned(),
                operation: "obliterate without force while jobs are active",
            });
        }
        self.pause().await?;
        self.inner
            .obliterate(force, 1000)
            .await
            .map_err(|e| self.error(e))?;
        self.inner
            .clear_groups(true)
            .await
            .map_err(|e| self.error(e))
    }
}
