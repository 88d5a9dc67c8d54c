//! A worker's event channel: unbounded by default, as it always was, or bounded when
//! asked (`WorkerOptions::event_capacity`), so that a worker whose events nobody reads
//! does not grow without limit. Sending never waits; an event that finds a bounded
//! channel full is dropped and counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;

/// The sending half, cloned into every task of the worker.
#[derive(Debug, Clone)]
pub(crate) struct EventSender<T> {
    tx: Sender<T>,
    dropped: Arc<AtomicU64>,
}

#[derive(Debug)]
enum Sender<T> {
    Unbounded(mpsc::UnboundedSender<T>),
    Bounded(mpsc::Sender<T>),
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        match self {
            Sender::Unbounded(tx) => Sender::Unbounded(tx.clone()),
            Sender::Bounded(tx) => Sender::Bounded(tx.clone()),
        }
    }
}

/// The receiving half.
#[derive(Debug)]
pub(crate) enum EventReceiver<T> {
    Unbounded(mpsc::UnboundedReceiver<T>),
    Bounded(mpsc::Receiver<T>),
}

impl<T> EventReceiver<T> {
    /// The next event, `None` once every sender is gone.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        match self {
            EventReceiver::Unbounded(rx) => rx.recv().await,
            EventReceiver::Bounded(rx) => rx.recv().await,
        }
    }
}

/// Makes a channel that holds every event (`None`) or up to `capacity` events (at
/// least 1).
pub(crate) fn channel<T>(capacity: Option<usize>) -> (EventSender<T>, EventReceiver<T>) {
    let (tx, rx) = match capacity {
        None => {
            let (tx, rx) = mpsc::unbounded_channel();
            (Sender::Unbounded(tx), EventReceiver::Unbounded(rx))
        }
        Some(capacity) => {
            let (tx, rx) = mpsc::channel(capacity.max(1));
            (Sender::Bounded(tx), EventReceiver::Bounded(rx))
        }
    };
    let sender = EventSender {
        tx,
        dropped: Arc::new(AtomicU64::new(0)),
    };
    (sender, rx)
}

impl<T> EventSender<T> {
    /// Queues `event`, or drops it when a bounded channel is full or the channel is
    /// closed. The result tells which, for callers that care; most ignore it, as they
    /// did an unbounded send's.
    pub(crate) fn send(&self, event: T) -> Result<(), T> {
        match &self.tx {
            Sender::Unbounded(tx) => tx.send(event).map_err(|e| e.0),
            Sender::Bounded(tx) => tx.try_send(event).map_err(|e| {
                if matches!(e, mpsc::error::TrySendError::Full(_)) {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
                e.into_inner()
            }),
        }
    }

    /// How many events were dropped because a bounded channel was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}
