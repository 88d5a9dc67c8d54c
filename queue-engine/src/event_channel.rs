//! A worker's event channel, bounded: a worker whose events nobody reads must not grow
//! without limit. Sending never waits; an event that finds the channel full is dropped
//! and counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;

/// The sending half, cloned into every task of the worker.
#[derive(Debug, Clone)]
pub(crate) struct EventSender<T> {
    tx: mpsc::Sender<T>,
    dropped: Arc<AtomicU64>,
}

/// Makes a channel that holds up to `capacity` events (at least 1).
pub(crate) fn channel<T>(capacity: usize) -> (EventSender<T>, mpsc::Receiver<T>) {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    let sender = EventSender {
        tx,
        dropped: Arc::new(AtomicU64::new(0)),
    };
    (sender, rx)
}

impl<T> EventSender<T> {
    /// Queues `event`, or drops it when the channel is full or closed. The result
    /// tells which, for callers that care; most ignore it, as they did an unbounded
    /// send's.
    pub(crate) fn send(&self, event: T) -> Result<(), T> {
        self.tx.try_send(event).map_err(|e| {
            if matches!(e, mpsc::error::TrySendError::Full(_)) {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            e.into_inner()
        })
    }

    /// How many events were dropped because the channel was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}
