//! Quiet outages: a component that loses Redis says so once, at `warn`, retries in
//! silence (each retry's error at `debug`), and says once, at `info`, that it has Redis
//! back and after how long. Without this, a ten-second outage of an app with four
//! queues wrote 84 lines that said the same thing.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// One component's view of its connection: up, or down since when.
#[derive(Debug)]
pub(crate) struct OutageLog {
    /// What a person reads in the lines: "worker of queue email", "cancellation
    /// listener of queue email".
    component: String,
    queue: String,
    down_since: Mutex<Option<Instant>>,
}

impl OutageLog {
    pub(crate) fn new(component: &'static str, queue: &str) -> Self {
        OutageLog {
            component: component.to_owned(),
            queue: queue.to_owned(),
            down_since: Mutex::new(None),
        }
    }

    /// A call failed for want of Redis: the first since it was up is a warning, the
    /// rest go to `debug`.
    pub(crate) fn failed(&self, error: &dyn std::fmt::Display) {
        let mut down = self
            .down_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if down.is_none() {
            *down = Some(Instant::now());
            tracing::warn!(
                queue = %self.queue,
                %error,
                "{} lost Redis; retrying (repeats at debug until it is back)",
                self.component
            );
        } else {
            tracing::debug!(queue = %self.queue, %error, "{} still without Redis", self.component);
        }
    }

    /// A call worked: if it was down, say once that it is back, and after how long.
    pub(crate) fn succeeded(&self) {
        let mut down = self
            .down_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(since) = down.take() {
            tracing::info!(
                queue = %self.queue,
                down_for = ?since.elapsed(),
                "{} has Redis back",
                self.component
            );
        }
    }
}
