//! In-process worker events on a bounded broadcast: a slow listener loses old events
//! (and is told how many), it never makes the channel grow.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast;

/// How many events a listener may fall behind before it starts losing them.
pub(crate) const CAPACITY: usize = 1024;

/// What this process's workers did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum WorkerEvent {
    /// An attempt started.
    Active {
        /// The queue.
        queue: String,
        /// The job id.
        job_id: String,
        /// The job name.
        name: String,
        /// The attempt number, 1-based.
        attempt: u32,
    },
    /// A job completed (its state is already `completed` in Redis).
    Completed {
        /// The queue.
        queue: String,
        /// The job id.
        job_id: String,
        /// The job name.
        name: String,
        /// The handler's return value.
        return_value: Value,
        /// The job's data, as the attempt received it (`None` when nobody listened to
        /// this process's worker events as the attempt started).
        data: Option<Arc<Value>>,
    },
    /// An attempt failed (its retry or final failure is already recorded in Redis).
    Failed {
        /// The queue.
        queue: String,
        /// The job id.
        job_id: String,
        /// The job name.
        name: String,
        /// The failure reason.
        reason: String,
        /// The attempt that failed, 1-based.
        attempt: u32,
        /// Attempts allowed.
        max_attempts: u32,
        /// No retry follows: the job is now `failed` (the dead-letter exit).
        is_final: bool,
        /// The job's data, as the attempt received it (`None` when nobody listened to
        /// this process's worker events as the attempt started).
        data: Option<Arc<Value>>,
    },
    /// A handler reported progress.
    Progress {
        /// The queue.
        queue: String,
        /// The job id.
        job_id: String,
        /// The job name (empty when the attempt's start was not seen).
        name: String,
        /// The progress value.
        progress: Value,
        /// The job's data, as the attempt received it (`None` when nobody listened to
        /// this process's worker events as the attempt started).
        data: Option<Arc<Value>>,
    },
    /// This worker runs a job again whose earlier run was lost (its worker died or
    /// blocked past its lock): the stall was recovered.
    Stalled {
        /// The queue.
        queue: String,
        /// The job id.
        job_id: String,
    },
    /// A handler held its thread for `blocked_for` in one go, without yielding
    /// (CPU work or a blocking call in async code). Its lock is safe, as the engine
    /// renews locks on its own threads, but the app's other tasks waited meanwhile:
    /// move the work into `tokio::task::spawn_blocking`.
    Blocked {
        /// The queue.
        queue: String,
        /// The job id.
        job_id: String,
        /// The job name.
        name: String,
        /// The longest single stretch the handler held its thread.
        blocked_for: std::time::Duration,
    },
    /// The lock of a running job was lost: another run holds it (this one's lock
    /// expired, and the job was taken over as stalled), or the job is no longer active.
    /// This run was cancelled (its `job.cancelled()` fired), so that the two do not go
    /// on side by side, and its outcome is dropped: a lost lock is not a failure of the
    /// job, and no `Failed` follows for this run.
    LockLost {
        /// The queue.
        queue: String,
        /// The job id.
        job_id: String,
    },
    /// The queue has no job ready for this worker.
    Drained {
        /// The queue.
        queue: String,
    },
    /// The worker hit an error (usually Redis); it keeps retrying.
    Error {
        /// The queue.
        queue: String,
        /// The error.
        message: String,
    },
}

impl WorkerEvent {
    /// The queue the event is about.
    pub fn queue(&self) -> &str {
        match self {
            WorkerEvent::Active { queue, .. }
            | WorkerEvent::Completed { queue, .. }
            | WorkerEvent::Failed { queue, .. }
            | WorkerEvent::Progress { queue, .. }
            | WorkerEvent::Stalled { queue, .. }
            | WorkerEvent::Blocked { queue, .. }
            | WorkerEvent::LockLost { queue, .. }
            | WorkerEvent::Drained { queue }
            | WorkerEvent::Error { queue, .. } => queue,
        }
    }

    /// The event's kind, as `#[on_worker_event]` names it: `active`, `completed`,
    /// `failed`, `progress`, `stalled`, `blocked`, `lock-lost`, `drained` or `error`
    /// (`queue_vocab::WORKER_EVENT_KINDS`; an attribute writes `lock_lost`).
    pub fn kind(&self) -> &'static str {
        match self {
            WorkerEvent::Active { .. } => "active",
            WorkerEvent::Completed { .. } => "completed",
            WorkerEvent::Failed { .. } => "failed",
            WorkerEvent::Progress { .. } => "progress",
            WorkerEvent::Stalled { .. } => "stalled",
            WorkerEvent::Blocked { .. } => "blocked",
            WorkerEvent::LockLost { .. } => "lock-lost",
            WorkerEvent::Drained { .. } => "drained",
            WorkerEvent::Error { .. } => "error",
        }
    }

    /// The job's data, as the attempt received it, for a completion, a failure or a
    /// progress report (see their `data` fields).
    pub fn job_data(&self) -> Option<&Value> {
        match self {
            WorkerEvent::Completed { data, .. }
            | WorkerEvent::Failed { data, .. }
            | WorkerEvent::Progress { data, .. } => data.as_deref(),
            _ => None,
        }
    }

    /// The job the event is about, if any.
    pub fn job_id(&self) -> Option<&str> {
        match self {
            WorkerEvent::Active { job_id, .. }
            | WorkerEvent::Completed { job_id, .. }
            | WorkerEvent::Failed { job_id, .. }
            | WorkerEvent::Progress { job_id, .. }
            | WorkerEvent::Stalled { job_id, .. }
            | WorkerEvent::Blocked { job_id, .. }
            | WorkerEvent::LockLost { job_id, .. } => Some(job_id),
            WorkerEvent::Drained { .. } | WorkerEvent::Error { .. } => None,
        }
    }
}

/// A subscription to this process's worker events.
///
/// ```no_run
/// # async fn demo(app: queue_core::QueueApp) {
/// use queue_core::WorkerEvent;
///
/// let mut events = app.worker_events();
/// while let Some(event) = events.recv().await {
///     if let WorkerEvent::Failed { job_id, reason, is_final: true, .. } = event {
///         tracing::error!(%job_id, %reason, "job exhausted its retries");
///     }
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct WorkerEvents {
    receiver: broadcast::Receiver<WorkerEvent>,
}

impl WorkerEvents {
    pub(crate) fn new(receiver: broadcast::Receiver<WorkerEvent>) -> Self {
        WorkerEvents { receiver }
    }

    /// The next event. Events this listener fell too far behind on are skipped (and
    /// logged); `None` once the app is gone.
    pub async fn recv(&mut self) -> Option<WorkerEvent> {
        loop {
            match self.receiver.recv().await {
                Ok(event) => return Some(event),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(
                        missed,
                        "a worker-event listener fell behind and lost events"
                    );
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// The next event already in the channel, without waiting.
    pub(crate) fn try_recv(&mut self) -> Option<WorkerEvent> {
        loop {
            match self.receiver.try_recv() {
                Ok(event) => return Some(event),
                // Skipped events are gone; read on from the oldest one kept.
                Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(_) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind an event can have is one the macros accept, and every kind the
    /// macros accept is one an event can have: both come from `queue-vocab`.
    #[test]
    fn worker_event_kinds_are_the_vocabulary() {
        let (q, j, n) = (String::new(), String::new(), String::new());
        let every = [
            WorkerEvent::Active {
                queue: q.clone(),
                job_id: j.clone(),
                name: n.clone(),
                attempt: 1,
            },
            WorkerEvent::Completed {
                queue: q.clone(),
                job_id: j.clone(),
                name: n.clone(),
                return_value: Value::Null,
                data: None,
            },
            WorkerEvent::Failed {
                queue: q.clone(),
                job_id: j.clone(),
                name: n.clone(),
                reason: n.clone(),
                attempt: 1,
                max_attempts: 1,
                is_final: true,
                data: None,
            },
            WorkerEvent::Progress {
                queue: q.clone(),
                job_id: j.clone(),
                name: n.clone(),
                progress: Value::Null,
                data: None,
            },
            WorkerEvent::Stalled {
                queue: q.clone(),
                job_id: j.clone(),
            },
            WorkerEvent::Blocked {
                queue: q.clone(),
                job_id: j.clone(),
                name: n.clone(),
                blocked_for: std::time::Duration::ZERO,
            },
            WorkerEvent::LockLost {
                queue: q.clone(),
                job_id: j.clone(),
            },
            WorkerEvent::Drained { queue: q.clone() },
            WorkerEvent::Error {
                queue: q,
                message: n,
            },
        ];
        let mut kinds: Vec<&str> = every.iter().map(WorkerEvent::kind).collect();
        let mut known = queue_vocab::WORKER_EVENT_KINDS.to_vec();
        kinds.sort_unstable();
        known.sort_unstable();
        assert_eq!(kinds, known);
    }

    #[tokio::test]
    async fn a_slow_listener_loses_old_events_instead_of_growing_the_channel() {
        let (tx, rx) = broadcast::channel(4);
        let mut slow = WorkerEvents::new(rx);
        for i in 0..10 {
            tx.send(WorkerEvent::Drained {
                queue: format!("q{i}"),
            })
            .unwrap();
        }
        // Only the newest four are kept; the rest were dropped, not buffered.
        assert_eq!(slow.recv().await.unwrap().queue(), "q6");
        drop(tx);
        let rest: Vec<String> = std::iter::from_fn(|| futures::executor::block_on(slow.recv()))
            .map(|e| e.queue().to_owned())
            .collect();
        assert_eq!(rest, ["q7", "q8", "q9"]);
    }
}
