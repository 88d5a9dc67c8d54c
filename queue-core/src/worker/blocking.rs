//! Notices a handler that blocks its thread: one poll of its future that takes long
//! means it did synchronous work (CPU, a blocking client, `std::thread::sleep`)
//! without yielding, holding up every task queued on that thread.
//!
//! The engine's lock renewal runs on its own threads, so such a handler keeps its
//! lock; but it still starves the app's other tasks (HTTP requests, other jobs), so
//! it is reported: a warning and a [`WorkerEvent::Blocked`](crate::WorkerEvent::Blocked).

use std::time::{Duration, Instant};

/// A single poll longer than this is reported. Well-behaved async code yields within
/// microseconds; a whole second of one poll is never an accident.
pub(crate) const BLOCKING_REPORT_AFTER: Duration = Duration::from_secs(1);

/// The longest single poll of a handler's future so far, kept by the future that polls
/// it (`attempt::Supervised`), so that it is still there when a timeout drops the
/// handler's future right after the poll that blocked.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LongestPoll(Duration);

impl LongestPoll {
    /// Runs `poll` (one poll of the watched future), timed.
    pub(crate) fn time<T>(&mut self, poll: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let polled = poll();
        self.0 = self.0.max(started.elapsed());
        polled
    }

    pub(crate) fn get(self) -> Duration {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;

    use super::*;

    /// Polls `future` to its end, each poll timed.
    async fn watched<T>(future: impl Future<Output = T>) -> (T, Duration) {
        let mut future = pin!(future);
        let mut longest = LongestPoll::default();
        let value = std::future::poll_fn(|cx| longest.time(|| future.as_mut().poll(cx))).await;
        (value, longest.get())
    }

    #[tokio::test]
    async fn a_blocking_poll_is_measured_and_yielding_is_not() {
        let (value, longest) = watched(async {
            tokio::task::yield_now().await;
            std::thread::sleep(Duration::from_millis(60));
            7
        })
        .await;
        assert_eq!(value, 7);
        assert!(longest >= Duration::from_millis(60));

        // Waiting is not blocking: a sleep that yields shows no long poll.
        let ((), longest) = watched(tokio::time::sleep(Duration::from_millis(60))).await;
        assert!(longest < Duration::from_millis(60));
    }
}
