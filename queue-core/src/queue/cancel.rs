//! Cancelling a job wherever it is: removed if not started, signalled if running; a
//! flow parent that cannot be removed is marked to fail without running.

use std::collections::HashMap;

use super::Queue;
use crate::error::Error;
use crate::job::JobState;

/// What [`Queue::cancel`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelOutcome {
    /// The job had not started; it was removed.
    Removed,
    /// The job is running, or (a flow parent) one of its descendants is: the signal was
    /// sent to the worker processes listening on the queues concerned (how many is
    /// given). The job ends failed as cancelled; a flow parent never runs its handler.
    Signalled {
        /// Worker processes that received the request (0 when the running jobs'
        /// workers were not listening: a parent still fails once they end).
        listeners: u64,
    },
    /// The job had already finished; nothing was done.
    AlreadyFinished(JobState),
    /// No such job.
    NotFound,
}

/// The most pending children of one parent a cancel visits.
const MAX_CANCELLED_CHILDREN: usize = 10_000;

/// The failure reason of a job cancelled before a worker took it.
const CANCELLED_BEFORE_IT_RAN: &str = "cancelled before it ran (Queue::cancel)";

impl<T> Queue<T> {
    /// Cancels a job: a waiting or delayed job is removed; for an active job the
    /// cancellation signal is raised in whichever process runs it (delivered through
    /// Redis), the handler sees `job.cancelled()` resolve, and the job fails as
    /// cancelled without retries. A handler that does not stop within the processor's
    /// cancel grace (5 s by default) has its future dropped.
    ///
    /// A flow parent is removed with its children when none of them has started.
    /// Otherwise it is marked to fail as cancelled (BullMQ's deferred failure, which
    /// Node's workers honour too): it never runs its handler, whatever its children do
    /// from then on. Its children not started are removed, its running ones signalled;
    /// once they have ended, the parent fails (with
    /// [`OnChildFailure::FailParent`](crate::OnChildFailure::FailParent), naming the
    /// child that failed as cancelled; otherwise as cancelled).
    ///
    /// ```no_run
    /// # async fn demo(exports: queue_core::Queue<()>) -> queue_core::Result<()> {
    /// use queue_core::queue::CancelOutcome;
    /// match exports.cancel("export-7").await? {
    ///     CancelOutcome::Removed | CancelOutcome::Signalled { .. } => println!("cancelling"),
    ///     CancelOutcome::AlreadyFinished(state) => println!("too late: {state}"),
    ///     CancelOutcome::NotFound => println!("no such export"),
    ///     _ => {}
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn cancel(&self, id: &str) -> Result<CancelOutcome, Error> {
        // Not a job's id (`meta`, `repeat:<scheduler>`): no job to cancel, no key touched.
        if !crate::options::could_be_job_id(id) {
            return Ok(CancelOutcome::NotFound);
        }
        self.timed("cancel", self.cancel_now(id)).await
    }

    async fn cancel_now(&self, id: &str) -> Result<CancelOutcome, Error> {
        let engine = self.engine().await?;
        match engine.get_job_state(id).await? {
            None => Ok(CancelOutcome::NotFound),
            Some(state) if state.is_finished() => Ok(CancelOutcome::AlreadyFinished(state)),
            Some(JobState::Active) => self.signal(id).await,
            Some(_) => {
                if engine.remove(id).await? {
                    return Ok(CancelOutcome::Removed);
                }
                // Something of it holds a lock: it started since the state was read,
                // or it is a flow parent with a running descendant.
                let mut queues = HashMap::new();
                let listeners = Box::pin(self.stop(id, &mut queues)).await?;
                tracing::info!(queue = %self.name(), job_id = %id, listeners, "cancellation requested");
                Ok(CancelOutcome::Signalled { listeners })
            }
        }
    }

    /// Stops job `id`, which could not be removed, and the flow below it. First it is
    /// marked to fail as cancelled when a worker takes it: from then on its handler
    /// cannot run, even when every child it waits for ends well (a running child that
    /// ignores its signal completes; the last child to end releases the parent). Then
    /// its descendants are stopped, and, if it is running itself, it is signalled.
    /// Returns how many listeners the signals reached. `queues` keeps the handles
    /// opened on the children's queues, one per queue for the whole tree.
    async fn stop(&self, id: &str, queues: &mut HashMap<String, Queue<()>>) -> Result<u64, Error> {
        let engine = self.engine().await?;
        engine.fail_when_taken(id, CANCELLED_BEFORE_IT_RAN).await?;
        let mut listeners = 0;
        for child in self.get_children(id, MAX_CANCELLED_CHILDREN).await?.pending {
            let queue = queues
                .entry(child.queue.clone())
                .or_insert_with(|| self.sibling(&child.queue))
                .clone();
            let child_engine = queue.engine().await?;
            listeners += match child_engine.get_job_state(&child.id).await? {
                Some(JobState::Active) => child_engine.publish_cancel(&child.id).await?,
                Some(state) if !state.is_finished() => {
                    if child_engine.remove(&child.id).await? {
                        0
                    } else {
                        Box::pin(queue.stop(&child.id, queues)).await?
                    }
                }
                _ => 0,
            };
        }
        // Running itself (it started since its state was read): the mark does not stop
        // a handler that runs already; the signal does.
        if engine.get_job_state(id).await? == Some(JobState::Active) {
            listeners += engine.publish_cancel(id).await?;
        }
        Ok(listeners)
    }

    async fn signal(&self, id: &str) -> Result<CancelOutcome, Error> {
        let listeners = self.engine().await?.publish_cancel(id).await?;
        tracing::info!(queue = %self.name(), job_id = %id, listeners, "cancellation requested");
        Ok(CancelOutcome::Signalled { listeners })
    }
}
