//! What a running job is linked to, as the job sees it: where its progress and log
//! lines go, and where its cancellation comes from. The engine provides both for a live
//! job (`crate::backend::engine`); a test job has its own in memory. So this module, and every
//! module that handles jobs, knows nothing of the engine.

use std::fmt;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::Notify;

use super::children::RawChildren;
use crate::error::Error;

/// A live job's link to Redis: where its progress and log lines are written, and
/// where its flow children are read and removed.
pub(crate) trait JobWriter: Send + Sync + fmt::Debug {
    /// Stores `value` as the job's progress.
    fn update_progress(&self, value: serde_json::Value) -> BoxFuture<'_, Result<(), Error>>;
    /// Appends `line` to the job's log.
    fn log<'a>(&'a self, line: &'a str) -> BoxFuture<'a, Result<(), Error>>;
    /// What the job's flow children returned, and the failures it was allowed past.
    fn children(&self) -> BoxFuture<'_, Result<RawChildren, Error>>;
    /// Removes the job's flow children that have not started.
    fn remove_pending_children(&self) -> BoxFuture<'_, Result<(), Error>>;
}

/// Where a job's cancellation comes from.
pub(crate) trait CancelSource: Send + Sync + fmt::Debug {
    fn cancel(&self);
    fn is_cancelled(&self) -> bool;
    /// Resolves once cancelled (at once if it is already).
    fn cancelled(&self) -> BoxFuture<'_, ()>;
}

/// Raised by `Queue::cancel` (through the worker), by a lost lock, or by a test
/// handle; a handler observes it through `Job::cancelled`.
#[derive(Debug, Clone)]
pub(crate) struct CancelSignal(Arc<dyn CancelSource>);

impl Default for CancelSignal {
    fn default() -> Self {
        CancelSignal::new()
    }
}

impl CancelSignal {
    /// A signal of its own, raised only through [`CancelSignal::cancel`].
    pub(crate) fn new() -> Self {
        CancelSignal(Arc::new(LocalCancel::default()))
    }

    /// A signal raised wherever `source` is.
    pub(crate) fn from_source(source: Arc<dyn CancelSource>) -> Self {
        CancelSignal(source)
    }

    pub(crate) fn cancel(&self) {
        self.0.cancel();
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.0.is_cancelled()
    }

    pub(crate) async fn cancelled(&self) {
        self.0.cancelled().await;
    }

    /// [`CancelSignal::cancelled`] as a future of its own, for a future that keeps the
    /// signal beside the wait.
    pub(crate) fn cancelled_owned(&self) -> BoxFuture<'static, ()> {
        let source = self.0.clone();
        Box::pin(async move { source.cancelled().await })
    }
}

/// A cancellation flag with a wake-up for those who wait on it.
#[derive(Debug, Default)]
struct LocalCancel {
    raised: AtomicBool,
    wake: Notify,
}

impl CancelSource for LocalCancel {
    fn cancel(&self) {
        self.raised.store(true, Ordering::SeqCst);
        self.wake.notify_waiters();
    }

    fn is_cancelled(&self) -> bool {
        self.raised.load(Ordering::SeqCst)
    }

    fn cancelled(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let mut woken = pin!(self.wake.notified());
            loop {
                // Registered before the flag is read, so a `cancel` in between wakes it.
                woken.as_mut().enable();
                if self.is_cancelled() {
                    return;
                }
                woken.as_mut().await;
                woken.set(self.wake.notified());
            }
        })
    }
}

/// Set once a running attempt's lock is found in another run's hands, or its job no
/// longer active: shared with the attempt, whose outcome then counts for nothing (the
/// job is the other run's) and is reported as a lost lock, never as a failure. Here, not
/// in the engine's keeper that raises it, so that the worker's attempt can keep it.
#[derive(Clone, Debug, Default)]
pub(crate) struct LockLost(Arc<AtomicBool>);

impl LockLost {
    /// Whether the attempt's lock was lost.
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Raised by the lock keeper.
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_local_signal_wakes_its_waiters_and_stays_raised() {
        let signal = CancelSignal::new();
        assert!(!signal.is_cancelled());
        let waiter = tokio::spawn({
            let signal = signal.clone();
            async move { signal.cancelled().await }
        });
        tokio::task::yield_now().await;
        signal.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .unwrap();
        assert!(signal.is_cancelled());
        // Already raised: resolves at once.
        signal.cancelled().await;
    }
}
