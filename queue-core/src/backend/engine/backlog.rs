//! A queue's backlog as the liveness check needs it, in one round trip of O(1)
//! commands on BullMQ's keys: whether jobs wait, and whether anything but a stuck
//! worker explains that none is taken (the queue is paused, rate limited, or at its
//! global concurrency).

use std::time::Duration;

use super::connection::Connection;
use crate::error::Error;

/// What waits on a queue, and what may hold it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Backlog {
    /// Jobs in `wait` and `prioritized`: ready to be taken now.
    pub(crate) ready: u64,
    pub(crate) active: u64,
    pub(crate) paused: bool,
    /// The rate limiter's remaining window, when it holds the queue.
    pub(crate) limited_for: Option<Duration>,
    /// The global concurrency, when set.
    pub(crate) global_concurrency: Option<u64>,
}

impl Backlog {
    /// Why no job may be taken although some wait, if anything explains it.
    pub(crate) fn held_back_by(&self) -> Option<String> {
        if self.paused {
            return Some("the queue is paused".to_owned());
        }
        if let Some(window) = self.limited_for {
            return Some(format!("the queue is rate limited for {window:?}"));
        }
        match self.global_concurrency {
            Some(limit) if self.active >= limit => Some(format!(
                "the queue is at its global concurrency ({} of {limit} active)",
                self.active
            )),
            _ => None,
        }
    }

    pub(crate) async fn read(conn: &Connection, queue: &str) -> Result<Self, Error> {
        let base = conn.queue_base(queue);
        let mut pipe = redis::pipe();
        pipe.cmd("LLEN")
            .arg(format!("{base}:wait"))
            .cmd("ZCARD")
            .arg(format!("{base}:prioritized"))
            .cmd("LLEN")
            .arg(format!("{base}:active"))
            .cmd("HMGET")
            .arg(format!("{base}:meta"))
            .arg("paused")
            .arg("concurrency")
            .cmd("PTTL")
            .arg(format!("{base}:limiter"));
        let (wait, prioritized, active, (paused, concurrency), limiter_ttl): (
            u64,
            u64,
            u64,
            (Option<String>, Option<u64>),
            i64,
        ) = conn.pipeline(&pipe).await?;
        Ok(Backlog {
            ready: wait + prioritized,
            active,
            paused: paused.is_some(),
            limited_for: u64::try_from(limiter_ttl)
                .ok()
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis),
            global_concurrency: concurrency,
        })
    }
}
