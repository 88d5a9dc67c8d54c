//! Cancelling a job wherever it is: removed if not started, signalled if running.

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

/// The most pending children of one parent a cancel visits.
const MAX_CANCELLED_CHILDREN: usize = 10_000;

impl<T> Queue<T> {
    /// Cancels a job: a waiting or delayed job is removed; for an active job the
    /// cancellation signal is raised in whichever process runs it (delivered through
    /// Redis), the handler sees `job.cancelled()` resolve, and the job fails as
    /// cancelled without retries. A handler that does not stop within the processor's
    /// cancel grace (5 s by default) has its future dropped.
    ///
    /// A flow parent is removed with its children when none of them has started;
    /// otherwise its children not started are removed and its running ones signalled,
    /// and the parent ends as their failure policies say
    /// ([`OnChildFailure::FailParent`](crate::OnChildFailure::FailParent): failed).
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
        // Not a job's id (`meta`, `repeat:<scheduler>`): no job to cancel, no key touched.
        if !crate::options::could_be_job_id(id) {
            return Ok(CancelOutcome::NotFound);
        }
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
            Some(state) => {
                if engine.remove(id).await? {
                    Ok(CancelOutcome::Removed)
                } else if state == JobState::WaitingChildren {
                    // A flow parent with a running descendant: it cannot be removed
                    // while that child holds its lock.
                    let mut queues = HashMap::new();
                    let listeners = Box::pin(self.cancel_descendants(id, &mut queues)).await?;
                    Ok(CancelOutcome::Signalled { listeners })
                } else {
                    self.signal(id).await
                }
            }
        }
    }

    /// Stops the flow below parent `id`: descendants not started are removed, running
    /// ones signalled (they fail as cancelled, and their failure policies then end the
    /// parent). Returns how many listeners the signals reached. `queues` keeps the
    /// handles opened on the children's queues, one per queue for the whole tree.
    async fn cancel_descendants(
        &self,
        id: &str,
        queues: &mut HashMap<String, Queue<()>>,
    ) -> Result<u64, Error> {
        let mut listeners = 0;
        for child in self.get_children(id, MAX_CANCELLED_CHILDREN).await?.pending {
            let queue = queues
                .entry(child.queue.clone())
                .or_insert_with(|| self.sibling(&child.queue))
                .clone();
            let engine = queue.engine().await?;
            listeners += match engine.state(&child.id).await? {
                Some(JobState::Active) => engine.publish_cancel(&child.id).await?,
                Some(JobState::WaitingChildren) => {
                    if engine.remove(&child.id).await? {
                        0
                    } else {
                        Box::pin(queue.cancel_descendants(&child.id, queues)).await?
                    }
                }
                Some(state) if !state.is_finished() => {
                    if engine.remove(&child.id).await? {
                        0
                    } else {
                        engine.publish_cancel(&child.id).await?
                    }
                }
                _ => 0,
            };
        }
        tracing::info!(queue = %self.name(), job_id = %id, listeners, "flow cancellation requested");
        Ok(listeners)
    }

    async fn signal(&self, id: &str) -> Result<CancelOutcome, Error> {
        let listeners = self.engine().await?.publish_cancel(id).await?;
        tracing::info!(queue = %self.name(), job_id = %id, listeners, "cancellation requested");
        Ok(CancelOutcome::Signalled { listeners })
    }
}
