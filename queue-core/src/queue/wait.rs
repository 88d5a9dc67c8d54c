//! Waiting for a job's outcome: subscribe (through the app's one reader of the queue's
//! events), then read the state, then follow the events.

use std::time::Duration;

use super::{AddedJob, Queue};
use crate::contract::JobType;
use crate::encryption::Field;
use crate::error::Error;
use crate::events::QueueEvent;
use crate::job::JobState;
use crate::watch::{typed, JobOutcome, JobWatcher};

impl<T> Queue<T> {
    /// Subscribes to job `id`'s events, through the queue's one reader in this process
    /// (started now if nobody watched the queue). Every event written after this returns
    /// reaches the watcher; read the job's state after it, not before.
    ///
    /// A sealed return value ([`encryption`](crate::encryption)) comes opened: the
    /// watcher is the application's, and the application decides who reads it.
    pub async fn watch_job(&self, id: &str) -> Result<JobWatcher, Error> {
        let watcher = self.job_watch().watch(self.name(), id).await?;
        Ok(watcher.opening_with(self.sealer()))
    }

    /// Waits up to `timeout` for job `id` to finish: its output as JSON (opened, when
    /// sealed), its failure, [`JobOutcome::TimedOut`], or [`JobOutcome::Gone`]. Dropped
    /// (its caller went away), the wait ends at once and leaves nothing behind.
    pub async fn wait_for_job(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<JobOutcome<serde_json::Value>, Error> {
        match tokio::time::timeout(timeout, self.wait_until_finished(id)).await {
            Ok(outcome) => outcome,
            Err(_) => Ok(JobOutcome::TimedOut),
        }
    }

    async fn wait_until_finished(&self, id: &str) -> Result<JobOutcome<serde_json::Value>, Error> {
        loop {
            #[cfg(feature = "__private")]
            crate::watch::before_watch(self.name(), id).await;
            let mut watcher = self.watch_job(id).await?;
            // Subscribed: a finish from now on is an event, one before is in the state.
            if let Some(outcome) = self.outcome_now(id).await? {
                return Ok(outcome);
            }
            loop {
                match watcher.next().await {
                    Some(QueueEvent::Completed { return_value, .. }) => {
                        // Opened by the watcher when it could be; one that could not
                        // is an error here, not a sealed value passed off as output.
                        let output = self.sealer().open(Field::ReturnValue, return_value)?;
                        return Ok(JobOutcome::Completed(output));
                    }
                    Some(QueueEvent::Failed { reason, .. }) => {
                        let reason = self.open_reason(reason)?;
                        return Ok(JobOutcome::Failed { reason });
                    }
                    Some(QueueEvent::Removed { .. }) => return Ok(JobOutcome::Gone),
                    Some(_) => {}
                    // Behind, or the reader stopped: read the state again.
                    None => break,
                }
            }
        }
    }

    /// The job's outcome if it has finished (or is gone); `None` while it runs or waits.
    async fn outcome_now(&self, id: &str) -> Result<Option<JobOutcome<serde_json::Value>>, Error> {
        let Some(info) = self.get_job(id).await? else {
            return Ok(Some(JobOutcome::Gone));
        };
        Ok(match info.state {
            Some(JobState::Completed) => Some(JobOutcome::Completed(self.sealer().open(
                Field::ReturnValue,
                info.return_value.unwrap_or(serde_json::Value::Null),
            )?)),
            Some(JobState::Failed) => Some(JobOutcome::Failed {
                reason: self.open_reason(info.failed_reason.unwrap_or_default())?,
            }),
            _ => None,
        })
    }
}

impl AddedJob {
    /// Waits up to `timeout` for this job to finish: what its handler returned (as
    /// JSON), its failure, [`JobOutcome::TimedOut`], or [`JobOutcome::Gone`]. A job
    /// that finished before the call is seen. For a declared job's typed output, see
    /// [`wait_for`](Self::wait_for).
    ///
    /// ```no_run
    /// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
    /// use std::time::Duration;
    /// use queue_core::JobOptions;
    ///
    /// let added = app.queue::<u32>("square")?.add("square", 7, JobOptions::new()).await?;
    /// let outcome = added.wait(Duration::from_secs(5)).await?;
    /// println!("{outcome:?}");
    /// # Ok(()) }
    /// ```
    pub async fn wait(&self, timeout: Duration) -> Result<JobOutcome<serde_json::Value>, Error> {
        self.link.0.wait_for_job(&self.id, timeout).await
    }

    /// [`wait`](Self::wait), with the output typed as job `J`'s declaration says
    /// ([`#[job_queue]`](crate::job_queue)). An output that does not read as
    /// `J::Output` is [`Error::Serialize`].
    ///
    /// ```no_run
    /// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
    /// use std::time::Duration;
    /// use queue_core::prelude::*;
    ///
    /// #[derive(Serialize, Deserialize)]
    /// pub struct Square(u32);
    ///
    /// #[job_queue("math")]
    /// pub enum Math {
    ///     #[job("square", output = u64)]
    ///     Square(Square),
    /// }
    ///
    /// let added = app.queue_of::<Math>()?.add_job(Square(7), JobOptions::new()).await?;
    /// if let JobOutcome::Completed(n) = added.wait_for::<Square>(Duration::from_secs(5)).await? {
    ///     let n: u64 = n;
    ///     assert_eq!(n, 49);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_for<J: JobType>(
        &self,
        timeout: Duration,
    ) -> Result<JobOutcome<J::Output>, Error> {
        self.wait(timeout).await?.try_map(typed::<J::Output>)
    }
}
