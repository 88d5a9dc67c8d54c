//! What a server allows its clients: how long they may take to send headers, a body,
//! or nothing at all, and how long shutdown waits for requests in flight.

use std::time::Duration;

/// Time limits of [`serve`](crate::serve). The defaults suit an API behind a load
/// balancer; every limit can be changed.
///
/// ```
/// use std::time::Duration;
/// use queue_axum::ServeLimits;
///
/// let limits = ServeLimits::default().body(Duration::from_secs(60));
/// assert_eq!(limits.header_read_timeout(), Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct ServeLimits {
    header_read: Duration,
    body: Duration,
    idle: Duration,
    drain: Duration,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            header_read: Duration::from_secs(10),
            body: Duration::from_secs(30),
            idle: Duration::from_secs(60),
            drain: Duration::from_secs(10),
        }
    }
}

impl ServeLimits {
    /// A client must send a request's headers within this (default 10 s): a client
    /// holding connections open with partial headers is cut off.
    pub fn header_read(mut self, limit: Duration) -> Self {
        self.header_read = limit;
        self
    }

    /// A request's body must arrive within this from when the handler starts reading
    /// it (default 30 s).
    pub fn body(mut self, limit: Duration) -> Self {
        self.body = limit;
        self
    }

    /// A connection on which nothing is read or written for this long is closed
    /// (default 60 s): idle keep-alive connections and stalled transfers.
    pub fn idle(mut self, limit: Duration) -> Self {
        self.idle = limit;
        self
    }

    /// At shutdown, requests in flight get this long to finish (default 10 s) before
    /// their connections are closed and the workers are stopped.
    pub fn drain(mut self, limit: Duration) -> Self {
        self.drain = limit;
        self
    }

    /// The header-read limit.
    pub fn header_read_timeout(&self) -> Duration {
        self.header_read
    }

    /// The body limit.
    pub fn body_timeout(&self) -> Duration {
        self.body
    }

    /// The idle limit.
    pub fn idle_timeout(&self) -> Duration {
        self.idle
    }

    /// The drain limit.
    pub fn drain_timeout(&self) -> Duration {
        self.drain
    }
}
