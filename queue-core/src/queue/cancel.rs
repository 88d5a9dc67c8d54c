//! Cancelling a job wherever it is: removed if not started, signalled if running.

use super::Queue;
use crate::error::Error;
use crate::job::JobState;

/// What [`Queue::cancel`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelOutcome {
    /// The job had not started; it was removed.
    Removed,
    /// The job is running; its cancellation signal was sent to the worker processes
    /// listening on this queue (how many is given). The job ends failed as cancelled.
    Signalled {
        /// Worker processes that received the request.
        listeners: u64,
    },
    /// The job had already finished; nothing was done.
    AlreadyFinished(JobState),
    /// No such job.
    NotFound,
}

impl<T> Queue<T> {
    /// Cancels a job: a waiting or delayed job is removed; for an active job the
    /// cancellation signal is raised in whichever process runs it (delivered through
    /// Redis), the handler sees `job.cancelled()` resolve, and the job fails as
    /// cancelled without retries. A handler that does not stop within the processor's
    /// cancel grace (5 s by default) has its future dropped.
    ///
    /// ```no_run
    /// # async fn demo(exports: queue_core::Queue<()>) -> queue_core::Result<()> {
    /// use queue_core::CancelOutcome;
    /// match exports.cancel("export-7").await? {
    ///     CancelOutcome::Removed | CancelOutcome::Signalled { .. } => println!("cancelling"),
    ///     CancelOutcome::AlreadyFinished(state) => println!("too late: {state}"),
    ///     CancelOutcome::NotFound => println!("no such export"),
    ///     _ => {}
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn cancel(&self, id: &str) -> Result<CancelOutcome, Error> {
        self.timed("cancel", self.cancel_now(id)).await
    }

    async fn cancel_now(&self, id: &str) -> Result<CancelOutcome, Error> {
        let engine = self.engine().await?;
        // A job can start between the state read and the removal: then `remove`
        // answers false (locked) and we signal it instead.
        match engine.state(id).await? {
            None => Ok(CancelOutcome::NotFound),
            Some(state) if state.is_finished() => Ok(CancelOutcome::AlreadyFinished(state)),
            Some(JobState::Active) => self.signal(id).await,
            Some(_) => {
                if engine.remove(id).await? {
                    Ok(CancelOutcome::Removed)
                } else {
                    self.signal(id).await
                }
            }
        }
    }

    async fn signal(&self, id: &str) -> Result<CancelOutcome, Error> {
        let listeners = self.engine().await?.publish_cancel(id).await?;
        tracing::info!(queue = %self.name(), job_id = %id, listeners, "cancellation requested");
        Ok(CancelOutcome::Signalled { listeners })
    }
}
