//! Events: the queue's cross-process Redis event stream ([`QueueEvents`]) and this
//! process's worker events ([`WorkerEvent`], [`WorkerEvents`]), and what a typed worker
//! event listener receives ([`EventJob`], [`JobFailure`]).

pub(crate) mod local;
mod typed;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use futures::future::BoxFuture;

use crate::encryption::{sealed_with, Field, SealError, Sealer};
use crate::error::Error;

pub use local::{WorkerEvent, WorkerEvents};
#[doc(hidden)]
pub use typed::TypedListener;
pub use typed::{EventJob, JobFailure};

/// One entry of a queue's Redis event stream (`<prefix>:<queue>:events`), written by
/// BullMQ's scripts whichever process (Rust or Node) acted on the job.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum QueueEvent {
    /// A job was added.
    Added {
        /// The job id.
        job_id: String,
        /// The job name.
        name: String,
    },
    /// A job is waiting (added, retried, or promoted).
    Waiting {
        /// The job id.
        job_id: String,
    },
    /// A job waits for a delay or a retry backoff.
    Delayed {
        /// The job id.
        job_id: String,
        /// When it becomes ready (ms since the Unix epoch).
        until_ms: i64,
    },
    /// A worker started a job.
    Active {
        /// The job id.
        job_id: String,
    },
    /// A job reported progress.
    Progress {
        /// The job id.
        job_id: String,
        /// The progress value.
        data: serde_json::Value,
    },
    /// A job completed.
    Completed {
        /// The job id.
        job_id: String,
        /// The handler's return value.
        return_value: serde_json::Value,
    },
    /// An attempt failed for good (BullMQ writes `failed` only when no retry follows).
    Failed {
        /// The job id.
        job_id: String,
        /// The failure reason.
        reason: String,
    },
    /// A job's lock expired while active; it is being recovered.
    Stalled {
        /// The job id.
        job_id: String,
    },
    /// A job was removed.
    Removed {
        /// The job id.
        job_id: String,
    },
    /// An add used an existing job id: nothing was added.
    Duplicated {
        /// The job id.
        job_id: String,
    },
    /// An add was dropped by deduplication.
    Deduplicated {
        /// The id of the job that was not added.
        job_id: String,
        /// The deduplication id.
        deduplication_id: String,
    },
    /// A job used its last attempt.
    RetriesExhausted {
        /// The job id.
        job_id: String,
    },
    /// No job is waiting any more.
    Drained,
    /// The queue was paused.
    Paused,
    /// The queue was resumed.
    Resumed,
    /// An event this version does not type (forward compatibility).
    Other {
        /// The event name as written to the stream.
        name: String,
    },
}

impl QueueEvent {
    /// This event with what its queue sealed opened, for the application's code (a
    /// listener, a watcher's reader): a completion's return value, a failure's reason.
    /// One that does not open stays as stored (no secret shown; the job's own reads say
    /// why), and a return value's error is handed back for the caller to report.
    pub(crate) fn opened(self, sealer: &Sealer) -> (QueueEvent, Option<SealError>) {
        match self {
            QueueEvent::Completed {
                job_id,
                return_value,
            } if sealed_with(&return_value).is_some() => {
                let (return_value, unopened) =
                    match sealer.open(Field::ReturnValue, return_value.clone()) {
                        Ok(opened) => (opened, None),
                        Err(e) => (return_value, Some(e)),
                    };
                let event = QueueEvent::Completed {
                    job_id,
                    return_value,
                };
                (event, unopened)
            }
            QueueEvent::Failed { job_id, reason } => {
                let reason = sealer
                    .open_text(Field::FailedReason, reason.clone())
                    .unwrap_or(reason);
                (QueueEvent::Failed { job_id, reason }, None)
            }
            other => (other, None),
        }
    }

    /// The event's kind, as BullMQ and `#[on_queue_event]` name it: `added`, `waiting`,
    /// `delayed`, `active`, `progress`, `completed`, `failed`, `stalled`, `removed`,
    /// `duplicated`, `deduplicated`, `retries-exhausted`, `drained`, `paused`, `resumed`.
    pub fn kind(&self) -> &str {
        match self {
            QueueEvent::Added { .. } => "added",
            QueueEvent::Waiting { .. } => "waiting",
            QueueEvent::Delayed { .. } => "delayed",
            QueueEvent::Active { .. } => "active",
            QueueEvent::Progress { .. } => "progress",
            QueueEvent::Completed { .. } => "completed",
            QueueEvent::Failed { .. } => "failed",
            QueueEvent::Stalled { .. } => "stalled",
            QueueEvent::Removed { .. } => "removed",
            QueueEvent::Duplicated { .. } => "duplicated",
            QueueEvent::Deduplicated { .. } => "deduplicated",
            QueueEvent::RetriesExhausted { .. } => "retries-exhausted",
            QueueEvent::Drained => "drained",
            QueueEvent::Paused => "paused",
            QueueEvent::Resumed => "resumed",
            QueueEvent::Other { name } => name,
        }
    }

    /// The job the event is about, if any.
    pub fn job_id(&self) -> Option<&str> {
        match self {
            QueueEvent::Added { job_id, .. }
            | QueueEvent::Waiting { job_id }
            | QueueEvent::Delayed { job_id, .. }
            | QueueEvent::Active { job_id }
            | QueueEvent::Progress { job_id, .. }
            | QueueEvent::Completed { job_id, .. }
            | QueueEvent::Failed { job_id, .. }
            | QueueEvent::Stalled { job_id }
            | QueueEvent::Removed { job_id }
            | QueueEvent::Duplicated { job_id }
            | QueueEvent::Deduplicated { job_id, .. }
            | QueueEvent::RetriesExhausted { job_id } => Some(job_id),
            QueueEvent::Drained
            | QueueEvent::Paused
            | QueueEvent::Resumed
            | QueueEvent::Other { .. } => None,
        }
    }
}

/// Reads one queue's Redis event stream from this process, starting at the moment it
/// was opened. Events come from every process working on the queue.
///
/// ```no_run
/// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
/// use queue_core::QueueEvent;
///
/// let events = app.queue_events("email").await?;
/// while let Some(event) = events.next().await {
///     if let QueueEvent::Failed { job_id, reason } = event {
///         eprintln!("{job_id} failed: {reason}");
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct QueueEvents {
    events: tokio::sync::Mutex<mpsc::Receiver<QueueEvent>>,
    lagged: Arc<AtomicU64>,
    stop: Option<oneshot::Sender<()>>,
    reader: Option<tokio::task::JoinHandle<()>>,
}

/// Where a [`QueueEvents`] reads from: the queue's Redis stream, as the engine reads it
/// (`crate::backend::engine`).
pub(crate) trait EventFeed: Send + Sync + 'static {
    /// The next event; `None` once the feed ends.
    fn next(&self) -> BoxFuture<'_, Option<QueueEvent>>;
    /// Releases the feed's connection.
    fn close(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// Events buffered for a reader that is behind; past this, events are dropped and
/// counted in [`QueueEvents::lagged`].
pub const QUEUE_EVENTS_CAPACITY: usize = 4096;

impl QueueEvents {
    /// Reads `inner` into a bounded buffer: the engine hands its events over an
    /// unbounded channel, which a slow reader would grow without limit.
    pub(crate) fn new(inner: Box<dyn EventFeed>) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_EVENTS_CAPACITY);
        let (stop, mut stopped) = oneshot::channel();
        let lagged = Arc::new(AtomicU64::new(0));
        let dropped = lagged.clone();
        let reader = tokio::spawn(async move {
            let mut behind = false;
            loop {
                let event = tokio::select! {
                    event = inner.next() => event,
                    _ = &mut stopped => break,
                };
                let Some(event) = event else { break };
                match tx.try_send(event) {
                    Ok(()) => behind = false,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        dropped.fetch_add(1, Ordering::Relaxed);
                        if !behind {
                            tracing::warn!(
                                capacity = QUEUE_EVENTS_CAPACITY,
                                "a QueueEvents reader is behind; events are dropped (see QueueEvents::lagged)"
                            );
                            behind = true;
                        }
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => break,
                }
            }
            inner.close().await;
        });
        QueueEvents {
            events: tokio::sync::Mutex::new(rx),
            lagged,
            stop: Some(stop),
            reader: Some(reader),
        }
    }

    /// The next event; `None` once closed.
    pub async fn next(&self) -> Option<QueueEvent> {
        self.events.lock().await.recv().await
    }

    /// How many events were dropped because this reader fell more than
    /// [`QUEUE_EVENTS_CAPACITY`] behind.
    pub fn lagged(&self) -> u64 {
        self.lagged.load(Ordering::Relaxed)
    }

    /// Stops reading and releases the connection.
    pub async fn close(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.await;
        }
    }

    /// Reads until an event for which `matches` is true, or `deadline` passes
    /// ([`Error::Timeout`]).
    pub async fn wait_for(
        &self,
        deadline: std::time::Duration,
        mut matches: impl FnMut(&QueueEvent) -> bool,
    ) -> Result<QueueEvent, Error> {
        let search = async {
            while let Some(event) = self.next().await {
                if matches(&event) {
                    return Some(event);
                }
            }
            None
        };
        match tokio::time::timeout(deadline, search).await {
            Ok(Some(event)) => Ok(event),
            Ok(None) => Err(Error::Redis("the event stream closed".into())),
            Err(_) => Err(Error::Timeout {
                what: "wait_for (no matching event)",
                after: deadline,
            }),
        }
    }
}

impl Drop for QueueEvents {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::QueueEvent;

    /// Every kind a queue event can have is one the macros accept, and the other way
    /// round: both come from `queue-vocab`.
    #[test]
    fn queue_event_kinds_are_the_vocabulary() {
        let j = String::new;
        let every = [
            QueueEvent::Added {
                job_id: j(),
                name: j(),
            },
            QueueEvent::Waiting { job_id: j() },
            QueueEvent::Delayed {
                job_id: j(),
                until_ms: 0,
            },
            QueueEvent::Active { job_id: j() },
            QueueEvent::Progress {
                job_id: j(),
                data: serde_json::Value::Null,
            },
            QueueEvent::Completed {
                job_id: j(),
                return_value: serde_json::Value::Null,
            },
            QueueEvent::Failed {
                job_id: j(),
                reason: j(),
            },
            QueueEvent::Stalled { job_id: j() },
            QueueEvent::Removed { job_id: j() },
            QueueEvent::Duplicated { job_id: j() },
            QueueEvent::Deduplicated {
                job_id: j(),
                deduplication_id: j(),
            },
            QueueEvent::RetriesExhausted { job_id: j() },
            QueueEvent::Drained,
            QueueEvent::Paused,
            QueueEvent::Resumed,
        ];
        let mut kinds: Vec<&str> = every.iter().map(QueueEvent::kind).collect();
        let mut known = queue_vocab::QUEUE_EVENT_KINDS.to_vec();
        kinds.sort_unstable();
        known.sort_unstable();
        assert_eq!(kinds, known);
    }
}
