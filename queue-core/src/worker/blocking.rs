//! Notices a handler that blocks its thread: one poll of its future that takes long
//! means it did synchronous work (CPU, a blocking client, `std::thread::sleep`)
//! without yielding, holding up every task queued on that thread.
//!
//! The engine's lock renewal runs on its own threads, so such a handler keeps its
//! lock; but it still starves the app's other tasks (HTTP requests, other jobs), so
//! it is reported: a warning and a [`WorkerEvent::Blocked`](crate::WorkerEvent::Blocked).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

/// A single poll longer than this is reported. Well-behaved async code yields within
/// microseconds; a whole second of one poll is never an accident.
pub(crate) const BLOCKING_REPORT_AFTER: Duration = Duration::from_secs(1);

/// A handler's future, timed poll by poll.
pub(crate) struct PollWatch<T> {
    inner: BoxFuture<'static, T>,
    longest: LongestPoll,
}

/// The longest single poll so far, readable after the future is gone (a timeout may
/// drop it right after the poll that blocked).
#[derive(Clone, Default)]
pub(crate) struct LongestPoll(Arc<AtomicU64>);

impl LongestPoll {
    pub(crate) fn get(&self) -> Duration {
        Duration::from_micros(self.0.load(Ordering::Relaxed))
    }

    fn record(&self, poll: Duration) {
        let micros = u64::try_from(poll.as_micros()).unwrap_or(u64::MAX);
        self.0.fetch_max(micros, Ordering::Relaxed);
    }
}

impl<T> PollWatch<T> {
    pub(crate) fn new(inner: BoxFuture<'static, T>) -> (Self, LongestPoll) {
        let longest = LongestPoll::default();
        let watch = PollWatch {
            inner,
            longest: longest.clone(),
        };
        (watch, longest)
    }
}

impl<T> Future for PollWatch<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let started = Instant::now();
        let poll = self.inner.as_mut().poll(cx);
        self.longest.record(started.elapsed());
        poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_blocking_poll_is_measured_and_yielding_is_not() {
        let (blocking, longest) = PollWatch::new(Box::pin(async {
            tokio::task::yield_now().await;
            std::thread::sleep(Duration::from_millis(60));
            7
        }));
        assert_eq!(blocking.await, 7);
        assert!(longest.get() >= Duration::from_millis(60));

        // Waiting is not blocking: a sleep that yields shows no long poll.
        let (waiting, longest) = PollWatch::new(Box::pin(async {
            tokio::time::sleep(Duration::from_millis(60)).await;
        }));
        waiting.await;
        assert!(longest.get() < Duration::from_millis(60));
    }
}
