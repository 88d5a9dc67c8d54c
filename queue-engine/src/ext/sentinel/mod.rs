//! Redis Sentinel: where the sentinels are, asking them for the master, and a
//! connection that follows the master through a failover.
//!
//! A sentinel deployment keeps one master and its replicas under a name (`sentinel
//! monitor mymaster ...`). When the master fails, the sentinels promote a replica and
//! name it instead. redis-rs's `ConnectionManager` reconnects to the address it was
//! given, so after a failover it keeps dialling the dead master (or, once that comes
//! back as a replica, gets `READONLY` for every write). Node BullMQ follows failovers
//! through ioredis's sentinel support; this module gives the port the same:
//!
//! - [`SentinelOptions`](crate::sentinel::SentinelOptions) on [`RedisConnectionOptions::sentinel`](crate::options::RedisConnectionOptions::sentinel)
//!   names the sentinels and the master;
//! - every connection the crate opens (queues, workers' blocking reads, queue events)
//!   is then a [`SentinelConnection`](crate::sentinel::SentinelConnection): it asks the sentinels for the master
//!   (`SENTINEL GET-MASTER-ADDR-BY-NAME`), checks the server it reaches is a master
//!   (`ROLE`), and asks again whenever it loses it: a dropped socket, a timeout, or a
//!   `READONLY` / `MASTERDOWN` reply (the server was demoted; a command refused so is
//!   sent once more to the new master).

mod connection;
pub(crate) mod options;
mod resolver;

pub use connection::SentinelConnection;
pub use options::{SentinelOptions, DEFAULT_SENTINEL_PORT};
pub(crate) use resolver::MasterResolver;

use crate::options::RedisConnectionOptions;

impl RedisConnectionOptions {
    /// Find the master through Redis Sentinel; see [`sentinel`](Self::sentinel).
    ///
    /// ```
    /// use bullmq::options::RedisConnectionOptions;
    /// use bullmq::sentinel::SentinelOptions;
    ///
    /// let opts = RedisConnectionOptions::new()
    ///     .password("master-secret")
    ///     .sentinel(SentinelOptions::new(
    ///         "mymaster",
    ///         ["10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"],
    ///     ));
    /// assert!(opts.is_sentinel());
    /// ```
    pub fn sentinel(mut self, sentinel: SentinelOptions) -> Self {
        self.sentinel = Some(sentinel);
        self
    }

    /// Whether these options find the master through Redis Sentinel (and do not name
    /// a Redis Cluster, which takes precedence).
    pub fn is_sentinel(&self) -> bool {
        self.sentinel.is_some() && !self.is_cluster()
    }
}
