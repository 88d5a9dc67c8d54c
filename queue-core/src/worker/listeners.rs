//! Runs `#[on_worker_event]` and `#[on_queue_event]` functions. Each listener has a
//! bounded mailbox and one task that calls it for one event after the other, so a slow
//! listener holds up nobody and never grows memory: past the bound its events are
//! dropped, counted and warned about. A panicking call is logged; the listener goes on.

use crate::encryption::Sealer;
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::backend::{Backend, EngineQueueEvents, QUEUE_EVENTS};
use crate::deps::Deps;
use crate::error::Error;
use crate::events::{QueueEvent, QueueEvents, WorkerEvent, WorkerEvents};

/// Events waiting for one listener, at most.
pub const LISTENER_MAILBOX: usize = 1024;

/// How long a stopping app waits for listeners to finish the events they were sent.
const DRAIN_LISTENERS: Duration = Duration::from_secs(5);

/// What one listener lost because it was too slow.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListenerStats {
    /// The listener (its function's path).
    pub listener: &'static str,
    /// Events dropped because its mailbox was full.
    pub dropped: u64,
}

/// One listener's bounded queue, and what it dropped.
struct Mailbox<E> {
    label: &'static str,
    tx: mpsc::Sender<E>,
    dropped: Arc<AtomicU64>,
    behind: AtomicBool,
}

impl<E: Send + 'static> Mailbox<E> {
    /// The mailbox and the task that calls `call` for each event in it.
    fn start(label: &'static str, call: Call<E>) -> (Self, JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<E>(LISTENER_MAILBOX);
        let task = tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                // `None`: the event is not for this listener (a typed listener's other
                // job types, a retried failure for a `final_only` one). `build` checked
                // the listener's dependencies; none is missing here.
                let Some(call) = call(event) else {
                    tracing::debug!(listener = label, "event not for this listener");
                    continue;
                };
                tracing::debug!(listener = label, "event listener called");
                if let Err(panic) = AssertUnwindSafe(call).catch_unwind().await {
                    let message = crate::handler::panic::message(panic.as_ref());
                    tracing::error!(listener = label, panic = message, "event listener panicked");
                }
            }
        });
        let mailbox = Mailbox {
            label,
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
            behind: AtomicBool::new(false),
        };
        (mailbox, task)
    }

    fn offer(&self, event: E) {
        match self.tx.try_send(event) {
            Ok(()) => self.behind.store(false, Ordering::Relaxed),
            Err(mpsc::error::TrySendError::Full(_)) => {
                let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if !self.behind.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        listener = self.label,
                        dropped,
                        capacity = LISTENER_MAILBOX,
                        "an event listener is too slow; its events are dropped"
                    );
                }
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    fn stats(&self) -> ListenerStats {
        ListenerStats {
            listener: self.label,
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }
}

/// The running listeners of a `Workers` handle.
#[derive(Default)]
pub(crate) struct Listeners {
    worker: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
    queue: Vec<JoinHandle<()>>,
    stats: Vec<Arc<dyn Fn() -> ListenerStats + Send + Sync>>,
    calls: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Listeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listeners")
            .field("listeners", &self.stats.len())
            .finish_non_exhaustive()
    }
}

/// One listener to start: the queue it listens to (its own, or the app's rename of it),
/// the event kind, its function's path, and how to call it with the app's dependencies.
#[derive(Debug)]
pub(crate) struct ListenerSpec<E> {
    pub(crate) queue: String,
    pub(crate) event: &'static str,
    pub(crate) label: &'static str,
    /// `None`: the event is not for it, or a dependency is missing (`build` rules that
    /// out).
    pub(crate) call: fn(E, &Deps) -> Option<BoxFuture<'static, ()>>,
}

/// The mailboxes of a set of listeners, keyed by what each listens to.
type Routed<E> = Vec<(String, &'static str, Arc<Mailbox<E>>)>;

/// One call of a listener with its dependencies (`None`: one is not provided).
type Call<E> = Box<dyn Fn(E) -> Option<BoxFuture<'static, ()>> + Send + Sync>;

/// A listener's function, called with the app's dependencies.
fn with_deps<E: 'static>(
    call: fn(E, &Deps) -> Option<BoxFuture<'static, ()>>,
    deps: &Arc<Deps>,
) -> Call<E> {
    let deps = deps.clone();
    Box::new(move |event| call(event, &deps))
}

impl Listeners {
    /// Starts the listeners: of this process's worker events, and of queues' Redis
    /// events (which an inline app refuses).
    pub(crate) async fn start(
        backend: &Backend,
        worker_listeners: Vec<ListenerSpec<WorkerEvent>>,
        events: WorkerEvents,
        queue_listeners: Vec<ListenerSpec<QueueEvent>>,
        deps: &Arc<Deps>,
        sealer_for: impl Fn(&str) -> Sealer,
    ) -> Result<Self, Error> {
        let mut listeners = Listeners::default();
        let worker: Routed<WorkerEvent> = worker_listeners
            .into_iter()
            .map(|l| {
                let mailbox = listeners.mailbox(l.label, with_deps(l.call, deps));
                (l.queue, l.event, mailbox)
            })
            .collect();
        if !worker.is_empty() {
            let (stop, stopped) = oneshot::channel();
            let task = tokio::spawn(dispatch_worker_events(worker, events, stopped));
            listeners.worker = Some((stop, task));
        }
        let mut by_queue: BTreeMap<String, Routed<QueueEvent>> = BTreeMap::new();
        for l in queue_listeners {
            let mailbox = listeners.mailbox(l.label, with_deps(l.call, deps));
            by_queue
                .entry(l.queue.clone())
                .or_default()
                .push((l.queue, l.event, mailbox));
        }
        for (name, routed) in by_queue {
            let conn = backend.redis(QUEUE_EVENTS)?;
            let events = QueueEvents::new(Box::new(EngineQueueEvents::open(conn, &name).await?));
            let sealer = sealer_for(&name);
            listeners
                .queue
                .push(tokio::spawn(dispatch_queue_events(routed, events, sealer)));
        }
        Ok(listeners)
    }

    fn mailbox<E: Send + 'static>(
        &mut self,
        label: &'static str,
        call: Call<E>,
    ) -> Arc<Mailbox<E>> {
        let (mailbox, task) = Mailbox::start(label, call);
        let mailbox = Arc::new(mailbox);
        let watched = mailbox.clone();
        self.stats.push(Arc::new(move || watched.stats()));
        self.calls.push(task);
        mailbox
    }

    /// What each listener dropped so far.
    pub(crate) fn stats(&self) -> Vec<ListenerStats> {
        self.stats.iter().map(|stats| stats()).collect()
    }

    /// Delivers the worker events already sent, lets the listeners finish what they
    /// were given (a few seconds at most), then stops.
    pub(crate) async fn stop(self) {
        if let Some((stop, task)) = self.worker {
            let _ = stop.send(());
            let _ = task.await;
        }
        for task in self.queue {
            task.abort();
            let _ = task.await;
        }
        // The dispatchers held the last senders: each listener ends after its queue.
        drop(self.stats);
        let calls = futures::future::join_all(self.calls);
        if tokio::time::timeout(DRAIN_LISTENERS, calls).await.is_err() {
            tracing::warn!("event listeners were still busy at shutdown");
        }
    }
}

async fn dispatch_worker_events(
    routed: Routed<WorkerEvent>,
    mut events: WorkerEvents,
    mut stopped: oneshot::Receiver<()>,
) {
    let deliver = |event: WorkerEvent| {
        for (_, _, mailbox) in routed
            .iter()
            .filter(|(queue, kind, _)| queue == event.queue() && *kind == event.kind())
        {
            mailbox.offer(event.clone());
        }
    };
    loop {
        tokio::select! {
            biased;
            event = events.recv() => match event {
                Some(event) => deliver(event),
                None => return,
            },
            _ = &mut stopped => {
                while let Some(event) = events.try_recv() {
                    deliver(event);
                }
                return;
            }
        }
    }
}

/// Hands each of a queue's Redis events to its listeners, with a sealed return value or
/// failure reason opened: listeners are the application's code, as a watcher's reader
/// is.
async fn dispatch_queue_events(routed: Routed<QueueEvent>, events: QueueEvents, sealer: Sealer) {
    while let Some(event) = events.next().await {
        // A listener gets a value that does not open as stored, quietly.
        let (event, _) = event.opened(&sealer);
        for (_, _, mailbox) in routed.iter().filter(|(_, kind, _)| *kind == event.kind()) {
            mailbox.offer(event.clone());
        }
    }
}
