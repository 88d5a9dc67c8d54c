//! A worker's event channel: unbounded by default, as it always was, or bounded when
//! asked (`WorkerOptions::event_capacity`), so that a worker whose events nobody reads
//! does not grow without limit. Sending never waits; an event that finds a bounded
//! channel full is dropped and counted. A bounded channel also tells its reader when
//! it is filling up ([`EventSender::filling`]), so a reader that drains it in batches
//! on a timer can be woken before it overflows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, Notify};

/// The sending half, cloned into every task of the worker.
#[derive(Debug, Clone)]
pub(crate) struct EventSender<T> {
    tx: Sender<T>,
    dropped: Arc<AtomicU64>,
    /// Notified by a send that leaves a bounded channel at least a quarter full.
    filling: Arc<Notify>,
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
        filling: Arc::new(Notify::new()),
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
            Sender::Bounded(tx) => {
                let sent = tx.try_send(event).map_err(|e| {
                    if matches!(e, mpsc::error::TrySendError::Full(_)) {
                        self.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    e.into_inner()
                });
                // A quarter full: three quarters of the room is left for the reader to
                // wake up in. Below it a send costs one atomic load more than before.
                if tx.capacity() <= tx.max_capacity() - tx.max_capacity().div_ceil(4) {
                    self.filling.notify_one();
                }
                sent
            }
        }
    }

    /// Completes once a send leaves a bounded channel at least a quarter full (at
    /// once if one did since the last call); never for an unbounded channel, which
    /// cannot overflow.
    pub(crate) async fn filling(&self) {
        match &self.tx {
            Sender::Unbounded(_) => std::future::pending().await,
            Sender::Bounded(_) => self.filling.notified().await,
        }
    }

    /// How many events were dropped because a bounded channel was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::channel;
    use futures::FutureExt;

    #[tokio::test]
    async fn a_bounded_channel_tells_its_reader_once_it_is_a_quarter_full() {
        let (tx, mut rx) = channel::<u32>(Some(8));
        tx.send(1).unwrap();
        assert!(
            tx.filling().now_or_never().is_none(),
            "one event of eight is not filling"
        );
        tx.send(2).unwrap();
        assert!(tx.filling().now_or_never().is_some(), "two of eight is");
        // Told once: the next wait is for the next send past the mark.
        assert!(tx.filling().now_or_never().is_none());
        while rx.recv().now_or_never().flatten().is_some() {}
        tx.send(3).unwrap();
        assert!(
            tx.filling().now_or_never().is_none(),
            "drained, then one event"
        );
    }

    #[tokio::test]
    async fn an_unbounded_channel_never_says_it_is_filling() {
        let (tx, _rx) = channel::<u32>(None);
        for n in 0..10_000 {
            tx.send(n).unwrap();
        }
        assert!(tx.filling().now_or_never().is_none());
    }
}
