//! The worker runtime: one engine worker per queue with a processor in this app, and
//! the handle that shuts them down.

mod attempt;
mod blocking;
mod listeners;
mod missed_run;
mod processor;
mod pulse;
mod tracker;

use std::sync::Arc;
use std::time::Duration;

use futures::future::{join_all, BoxFuture};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::backend::{Backend, EngineWorker, EventSink, WorkerSettings};
use crate::error::Error;

pub use crate::handler::{Batch, BatchHandler, BatchResult, Handler};
pub(crate) use attempt::Dispatcher;
pub(crate) use listeners::{ListenerSpec, Listeners};
pub use listeners::{ListenerStats, LISTENER_MAILBOX};
pub use processor::{AnyQueue, Processor};
pub(crate) use pulse::{is_suspect, PulseBoard, PulseReading, WorkerPulse};
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
    /// Their pulses, told of the shutdown (the liveness probe stops asking).
    pulses: Vec<Arc<WorkerPulse>>,
    listeners: Listeners,
    /// Workers that start once the app says it is ready.
    deferred: Option<Deferred>,
}

/// A start waiting for the app's readiness: cancelled by a shutdown before it.
#[derive(Debug)]
struct Deferred {
    queues: Vec<String>,
    cancel: oneshot::Sender<()>,
    task: JoinHandle<Result<Vec<EngineWorker>, Error>>,
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
        backend: &Backend,
        dispatchers: Vec<(WorkerSettings, Dispatcher)>,
        listeners: Listeners,
    ) -> Result<Self, Error> {
        let pulses = dispatchers.iter().map(|(_, d)| d.pulse.clone()).collect();
        match start_engine_workers(backend, dispatchers).await {
            Ok(workers) => Ok(Workers {
                workers,
                pulses,
                listeners,
                deferred: None,
            }),
            Err(e) => {
                listeners.stop().await;
                Err(e)
            }
        }
    }

    /// Workers whose engine workers start once `ready` resolves (the listeners run
    /// already). A shutdown before then cancels the start.
    pub(crate) fn deferred(
        backend: Backend,
        dispatchers: Vec<(WorkerSettings, Dispatcher)>,
        listeners: Listeners,
        ready: BoxFuture<'static, ()>,
    ) -> Self {
        let queues = dispatchers.iter().map(|(s, _)| s.queue.clone()).collect();
        let pulses = dispatchers.iter().map(|(_, d)| d.pulse.clone()).collect();
        let (cancel, cancelled) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            tokio::select! {
                biased;
                _ = cancelled => Ok(Vec::new()),
                () = ready => {
                    tracing::info!("the app is ready; workers start");
                    start_engine_workers(&backend, dispatchers).await
                }
            }
        });
        Workers {
            workers: Vec::new(),
            pulses,
            listeners,
            deferred: Some(Deferred {
                queues,
                cancel,
                task,
            }),
        }
    }

    /// Waits until the workers have started: at once for [`QueueApp::start_workers`],
    /// after the readiness future for [`QueueApp::start_workers_when`]. Fails when they
    /// could not start (Redis down, say).
    ///
    /// [`QueueApp::start_workers`]: crate::QueueApp::start_workers
    /// [`QueueApp::start_workers_when`]: crate::QueueApp::start_workers_when
    pub async fn started(&mut self) -> Result<(), Error> {
        let Some(deferred) = self.deferred.take() else {
            return Ok(());
        };
        let workers = deferred.task.await.map_err(|e| Error::Worker {
            queue: deferred.queues.join(", "),
            reason: format!("the start after readiness stopped: {e}"),
        })??;
        self.workers = workers;
        Ok(())
    }

    /// What each `#[on_worker_event]` / `#[on_queue_event]` listener has dropped
    /// because it was too slow (each has a mailbox of [`LISTENER_MAILBOX`] events).
    pub fn listener_stats(&self) -> Vec<ListenerStats> {
        self.listeners.stats()
    }

    /// The queues these workers serve (or will, once the app is ready).
    pub fn queues(&self) -> Vec<&str> {
        match &self.deferred {
            Some(deferred) => deferred.queues.iter().map(String::as_str).collect(),
            None => self.workers.iter().map(EngineWorker::queue).collect(),
        }
    }

    /// Stops fetching new jobs, waits up to `deadline` for active ones to finish, then
    /// stops. Jobs still running at the deadline stay `active` until their lock
    /// expires and another worker recovers them.
    pub async fn shutdown(self, deadline: Duration) -> ShutdownReport {
        for pulse in &self.pulses {
            pulse.stopped();
        }
        let mut workers = self.workers;
        if let Some(deferred) = self.deferred {
            // Before readiness: nothing starts. After: the workers it started stop.
            let _ = deferred.cancel.send(());
            if let Ok(Ok(started)) = deferred.task.await {
                workers.extend(started);
            }
        }
        let still_active = join_all(workers.into_iter().map(|w| w.close(deadline)))
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

/// Starts one engine worker per dispatcher; on a failure, stops those started.
async fn start_engine_workers(
    backend: &Backend,
    dispatchers: Vec<(WorkerSettings, Dispatcher)>,
) -> Result<Vec<EngineWorker>, Error> {
    let mut workers = Vec::with_capacity(dispatchers.len());
    for (settings, dispatcher) in dispatchers {
        let sink: Arc<dyn EventSink> = dispatcher.tracker.clone();
        let pulse = dispatcher.pulse.clone();
        let started = match backend.redis(crate::backend::START_WORKERS) {
            Ok(conn) => {
                EngineWorker::start(conn, settings, dispatcher.into_process_fn(), sink).await
            }
            Err(e) => Err(e),
        };
        match started {
            Ok(worker) => {
                pulse.started();
                tracing::info!(queue = worker.queue(), "worker started");
                workers.push(worker);
            }
            Err(e) => {
                // Do not leave half a set running.
                join_all(workers.into_iter().map(|w| w.close(Duration::from_secs(5)))).await;
                return Err(e);
            }
        }
    }
    Ok(workers)
}
