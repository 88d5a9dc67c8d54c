//! The app's probes and what an operator reads of its Redis and its processes.

use super::QueueApp;
use crate::error::Error;
use crate::health::{info, roster, Health, HealthSettings, Probed, ProcessInfo, RedisInfo};

impl QueueApp {
    /// The app's liveness and readiness probes (see [`Health`]).
    pub fn health(&self, settings: HealthSettings) -> Health {
        Health::new(
            Probed {
                backend: self.inner.backend.clone(),
                pulses: self.inner.pulses.clone(),
                memory: self.inner.memory.clone(),
                #[cfg(feature = "sqlx")]
                outbox: self.inner.producer.outbox.clone(),
            },
            settings,
        )
    }

    /// The Redis server's version, memory, clients and load: one `INFO`.
    ///
    /// ```no_run
    /// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
    /// let info = app.redis_info().await?;
    /// if info.maxmemory_policy.as_deref() != Some("noeviction") {
    ///     println!("Redis may evict jobs: {:?}", info.maxmemory_policy);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn redis_info(&self) -> Result<RedisInfo, Error> {
        info::read(self.inner.backend.redis("redis_info")?).await
    }

    /// The processes running workers of this app's prefix that recorded themselves
    /// ([`QueueAppBuilder::process_roster`](crate::QueueAppBuilder::process_roster))
    /// within the last minute, most recently seen first: two commands, at most 500
    /// processes.
    pub async fn get_processes(&self) -> Result<Vec<ProcessInfo>, Error> {
        roster::processes(self.inner.backend.redis("get_processes")?).await
    }
}
