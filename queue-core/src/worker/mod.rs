//! The worker runtime: one engine worker per queue with a processor in this app, and
//! the handle that shuts them down.

mod attempt;
mod blocking;
mod listeners;
mod tracker;

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;

use crate::engine::{EngineWorker, EventSink, WorkerSettings};
use crate::error::Error;

pub(crate) use attempt::{panic_message, Dispatcher};
pub(crate) use listeners::Listeners;
pub use listeners::{ListenerStats, LISTENER_MAILBOX};
pub(crate) use tracker::AttemptTracker;

/// The running workers of an app (all its queues, or the subset asked for).
///
/// Dropping it leaves the workers running; call [`Workers::shutdown`] to stop them.
///
/// ```no_run
/// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
/// use std::time::Duration;
///
/// let workers = app.start_workers().await?;
/// // ... serve requests until a shutdown signal ...
/// let report = workers.shutdown(Duration::from_secs(30)).await;
/// assert!(report.is_clean(), "{} job(s) left active", report.still_active);
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "keep the workers and call `shutdown` to stop them gracefully; dropped, they run on with no way to stop them in order"]
pub struct Workers {
    workers: Vec<EngineWorker>,
    listeners: Listeners,
}

/// What a shutdown left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Jobs still running when the deadline passed; another worker recovers them as
    /// stalled once their lock expires.
    pub still_active: usize,
}

impl ShutdownReport {
    /// Every active job finished before the deadline.
    pub fn is_clean(&self) -> bool {
        self.still_active == 0
    }
}

impl Workers {
    pub(crate) async fn start(
        conn: &crate::engine::Connection,
        dispatchers: Vec<(WorkerSettings, Dispatcher)>,
        listeners: Listeners,
    ) -> Result<Self, Error> {
        let mut workers = Vec::with_capacity(dispatchers.len());
        for (settings, dispatcher) in dispatchers {
            let sink: Arc<dyn EventSink> = dispatcher.tracker.clone();
            match EngineWorker::start(conn, settings, dispatcher.into_process_fn(), sink).await {
                Ok(worker) => {
                    tracing::info!(queue = worker.queue(), "worker started");
                    workers.push(worker);
                }
                Err(e) => {
                    // Do not leave half a set running.
                    Workers { workers, listeners }
                        .shutdown(Duration::from_secs(5))
                        .await;
                    return Err(e);
                }
            }
        }
        Ok(Workers { workers, listeners })
    }

    /// What each `#[on_worker_event]` / `#[on_queue_event]` listener has dropped
    /// because it was too slow (each has a mailbox of [`LISTENER_MAILBOX`] events).
    pub fn listener_stats(&self) -> Vec<ListenerStats> {
        self.listeners.stats()
    }

    /// The queues these workers serve.
    pub fn queues(&self) -> Vec<&str> {
        self.workers.iter().map(EngineWorker::queue).collect()
    }

    /// Stops fetching new jobs, waits up to `deadline` for active ones to finish, then
    /// stops. Jobs still running at the deadline stay `active` until their lock
    /// expires and another worker recovers them.
    pub async fn shutdown(self, deadline: Duration) -> ShutdownReport {
        let still_active = join_all(self.workers.into_iter().map(|w| w.close(deadline)))
            .await
            .into_iter()
            .sum();
        self.listeners.stop().await;
        if still_active > 0 {
            tracing::warn!(
                still_active,
                "shutdown deadline passed with jobs still active"
            );
        } else {
            tracing::info!("workers stopped cleanly");
        }
        ShutdownReport { still_active }
    }
}
