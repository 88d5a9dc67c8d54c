//! What a server allows its clients: how many connections at once, how long they may
//! take to send headers, a body, or nothing at all, and how long shutdown waits for
//! requests in flight.

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
    /// `None`: derived from the process's open-file limit when serving starts.
    max_connections: Option<usize>,
    /// `None`: half the connection cap.
    max_per_client: Option<usize>,
    header_read: Duration,
    body: Duration,
    idle: Duration,
    drain: Duration,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            max_connections: None,
            max_per_client: None,
            header_read: Duration::from_secs(10),
            body: Duration::from_secs(30),
            idle: Duration::from_secs(60),
            drain: Duration::from_secs(10),
        }
    }
}

impl ServeLimits {
    /// The most connections open at once (at least 1), so that connections never use
    /// up the descriptors that Redis, the database and the handlers' files need. At
    /// the cap a new connection is answered `503` with `Retry-After: 1` at once and
    /// closed, not left waiting in the listen backlog. By default, from the process's
    /// limit of open files `n`: `max(n / 2, n - 256)`, which leaves 256 descriptors
    /// (or half, for a small limit) to the rest of the process; 128 where the limit
    /// cannot be read.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = Some(max.max(1));
        self
    }

    /// The most connections one client address holds at once (at least 1; by default
    /// half the connection cap): past it, a new connection from that address is
    /// answered `429` with `Retry-After: 1` and closed, so that one client (a slowloris
    /// holding connections with partial headers, say) cannot take every slot. Behind a
    /// reverse proxy every connection comes from the proxy: raise it to the cap.
    pub fn max_connections_per_client(mut self, max: usize) -> Self {
        self.max_per_client = Some(max.max(1));
        self
    }

    /// A client must send a request's headers within this (default 10 s): a client
    /// holding connections open with partial headers is cut off. It is also how long
    /// a kept-alive connection waits for its next request (hyper times both the same
    /// way): keep your load balancer's idle timeout below it.
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
    /// (default 60 s): stalled transfers. (An idle kept-alive connection is closed
    /// sooner, at the [`header_read`](Self::header_read) limit.)
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

    /// The connection cap: the one set, or the default for this process.
    pub fn max_connections_limit(&self) -> usize {
        self.max_connections.unwrap_or_else(|| {
            super::fd_limit::default_max_connections(super::fd_limit::open_files_limit())
        })
    }

    /// The per-client cap, under a connection cap of `max_connections`: the one set, or
    /// half the cap.
    pub fn max_connections_per_client_limit(&self, max_connections: usize) -> usize {
        self.max_per_client.unwrap_or((max_connections / 2).max(1))
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
