//! Waiting for a job's outcome: subscribe, then read the state, then follow the events.

use std::time::Duration;

use serde::de::DeserializeOwned;

use super::hub::JobWatcher;
use crate::contract::JobType;
use crate::error::Error;
use crate::events::QueueEvent;
use crate::flow::AddedFlow;
use crate::job::JobState;
use crate::queue::{AddedJob, Queue};

/// How a wait for a job ended.
///
/// ```no_run
/// # async fn demo(added: queue_core::AddedJob) -> queue_core::Result<()> {
/// use std::time::Duration;
/// use queue_core::JobOutcome;
///
/// match added.wait(Duration::from_secs(5)).await? {
///     JobOutcome::Completed(output) => println!("done: {output}"),
///     JobOutcome::Failed { reason } => println!("failed for good: {reason}"),
///     JobOutcome::TimedOut => println!("still running; look again later"),
///     JobOutcome::Gone => println!("removed before its outcome was read"),
///     _ => {}
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobOutcome<O> {
    /// The job completed: what its handler returned.
    Completed(O),
    /// The job failed for good (no retry follows).
    Failed {
        /// The failure's text.
        reason: String,
    },
    /// The job had not finished when the wait ended.
    TimedOut,
    /// The job is not in Redis (nor in the app's outbox): removed (by retention, for
    /// one) before its outcome could be read, or never added.
    Gone,
}

impl<O> JobOutcome<O> {
    /// Whether the job finished (completed or failed).
    pub fn is_finished(&self) -> bool {
        matches!(self, JobOutcome::Completed(_) | JobOutcome::Failed { .. })
    }

    fn try_map<P, E>(self, f: impl FnOnce(O) -> Result<P, E>) -> Result<JobOutcome<P>, E> {
        Ok(match self {
            JobOutcome::Completed(output) => JobOutcome::Completed(f(output)?),
            JobOutcome::Failed { reason } => JobOutcome::Failed { reason },
            JobOutcome::TimedOut => JobOutcome::TimedOut,
            JobOutcome::Gone => JobOutcome::Gone,
        })
    }
}

/// The queue an [`AddedJob`] was added to, for its `wait`. Not part of what the job
/// *is*: two answers for the same job are equal whichever handle added them.
#[derive(Clone, Default)]
pub(crate) struct JobLink(Option<Queue<()>>);

impl JobLink {
    pub(crate) fn to<T>(queue: &Queue<T>) -> Self {
        JobLink(Some(queue.retyped()))
    }
}

impl std::fmt::Debug for JobLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "linked"
        } else {
            "unlinked"
        })
    }
}

impl PartialEq for JobLink {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for JobLink {}

impl<T> Queue<T> {
    /// Subscribes to job `id`'s events, through the queue's one reader in this process
    /// (started now if nobody watched the queue). Every event written after this returns
    /// reaches the watcher; read the job's state after it, not before.
    pub async fn watch_job(&self, id: &str) -> Result<JobWatcher, Error> {
        if self.is_inline() {
            return Err(Error::Inline {
                operation: "watch_job",
            });
        }
        self.job_watch().watch(self.name(), id).await
    }

    /// Waits up to `timeout` for job `id` to finish: its output as JSON, its failure,
    /// [`JobOutcome::TimedOut`], or [`JobOutcome::Gone`]. Dropped (its caller went
    /// away), the wait ends at once and leaves nothing behind.
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
            before_watch(self.name(), id).await;
            let mut watcher = self.watch_job(id).await?;
            // Subscribed: a finish from now on is an event, one before is in the state.
            if let Some(outcome) = self.outcome_now(id).await? {
                return Ok(outcome);
            }
            loop {
                match watcher.next().await {
                    Some(QueueEvent::Completed { return_value, .. }) => {
                        return Ok(JobOutcome::Completed(return_value))
                    }
                    Some(QueueEvent::Failed { reason, .. }) => {
                        return Ok(JobOutcome::Failed { reason })
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
        let Some((info, state)) = self.get_job_and_state(id).await? else {
            return Ok(Some(JobOutcome::Gone));
        };
        Ok(match state {
            Some(JobState::Completed) => Some(JobOutcome::Completed(
                info.return_value.unwrap_or(serde_json::Value::Null),
            )),
            Some(JobState::Failed) => Some(JobOutcome::Failed {
                reason: info.failed_reason.unwrap_or_default(),
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
        let Some(queue) = &self.link.0 else {
            return Err(Error::Inline {
                operation: "wait (the job ran when it was added)",
            });
        };
        queue.wait_for_job(&self.id, timeout).await
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

impl AddedFlow {
    /// Waits up to `timeout` for the flow's root to finish, as [`AddedJob::wait`].
    pub async fn wait(&self, timeout: Duration) -> Result<JobOutcome<serde_json::Value>, Error> {
        self.job.wait(timeout).await
    }

    /// The root's typed output, as [`AddedJob::wait_for`].
    pub async fn wait_for<J: JobType>(
        &self,
        timeout: Duration,
    ) -> Result<JobOutcome<J::Output>, Error> {
        self.job.wait_for::<J>(timeout).await
    }
}

fn typed<O: DeserializeOwned>(output: serde_json::Value) -> Result<O, Error> {
    serde_json::from_value(output).map_err(|source| Error::Serialize {
        what: "the job's output",
        source,
    })
}

/// Test plumbing: a future to await before a wait for job `queue`/`id` subscribes (a
/// test finishes the job there, between its `add` and the subscription).
#[cfg(feature = "__private")]
type BeforeWatch = futures::future::BoxFuture<'static, ()>;

#[cfg(feature = "__private")]
static BEFORE_WATCH: std::sync::Mutex<Vec<(String, String, BeforeWatch)>> =
    std::sync::Mutex::new(Vec::new());

#[cfg(feature = "__private")]
pub(crate) fn set_before_watch(queue: &str, id: &str, hook: BeforeWatch) {
    BEFORE_WATCH
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push((queue.to_owned(), id.to_owned(), hook));
}

#[cfg(feature = "__private")]
async fn before_watch(queue: &str, id: &str) {
    let hook = {
        let mut hooks = BEFORE_WATCH
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = hooks.iter().position(|(q, i, _)| q == queue && i == id);
        at.map(|at| hooks.swap_remove(at).2)
    };
    if let Some(hook) = hook {
        hook.await;
    }
}
