//! A worker's loops without Redis: the first failure of an outage is a warning, the
//! retries that follow are `debug`, and the first success after it says at `info` that
//! Redis is back and after how long. (Upstream warns on every retry: a ten-second
//! outage of four queues wrote dozens of identical lines.)

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use tracing::{debug, info, warn};

/// Whether a worker's connection is down, and since when.
#[derive(Debug, Default)]
pub(crate) struct Outage {
    down_since: Mutex<Option<Instant>>,
}

impl Outage {
    /// A call to Redis failed (`what` says which): a warning the first time.
    pub(crate) fn failed(&self, queue: &str, what: &str, error: &dyn std::fmt::Display) {
        let mut down = self
            .down_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if down.is_none() {
            *down = Some(Instant::now());
            warn!(queue, %error, "worker lost Redis ({what}); retrying, repeats at debug until it is back");
        } else {
            debug!(queue, %error, "{what}; still retrying");
        }
    }

    /// A call to Redis worked: if the worker was without it, say once that it is back.
    pub(crate) fn answered(&self, queue: &str) {
        let mut down = self
            .down_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(since) = down.take() {
            info!(queue, down_for = ?since.elapsed(), "worker has Redis back");
        }
    }
}
