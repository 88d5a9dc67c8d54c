//! The Redis memory guard. BullMQ keeps every job in Redis: finished jobs that are not
//! removed fill it until it refuses writes (`OOM command not allowed`), or, under any
//! eviction policy but `noeviction`, until it silently deletes jobs. So the app reads
//! the policy once at start-up, and polls `used_memory` against `maxmemory` (one `INFO
//! memory`, at most once a second, never per job): above the high-water mark, `add`
//! fails fast with [`Error::RedisMemoryHigh`](crate::Error::RedisMemoryHigh) and the
//! outbox keeps its rows, until memory falls.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use crate::backend::Connection;
use crate::error::Error;
use crate::queue::AddGate;

/// How often the guard reads Redis's memory.
pub(crate) const POLL_EVERY: Duration = Duration::from_secs(1);
/// What a refused `add` tells its caller to wait before trying again.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The Redis memory guard's settings, for
/// [`QueueAppBuilder::memory_guard`](crate::QueueAppBuilder::memory_guard). On by
/// default: a warning for an eviction policy that deletes jobs, and adds refused above
/// 90 % of `maxmemory` (nothing is refused when Redis has no `maxmemory`).
///
/// ```no_run
/// # async fn demo() -> queue_core::Result<()> {
/// use queue_core::{health::MemoryGuard, QueueApp};
///
/// let app = QueueApp::builder()
///     .redis("redis://127.0.0.1:6379")
///     // Refuse to start on a Redis that may evict jobs; refuse adds above 80 %.
///     .memory_guard(MemoryGuard::new().require_noeviction(true).high_water(0.8))
///     .build()
///     .await?;
/// # let _ = app; Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[must_use]
pub struct MemoryGuard {
    pub(crate) require_noeviction: bool,
    /// `None`: no high-water mark.
    pub(crate) high_water: Option<f64>,
}

impl Default for MemoryGuard {
    fn default() -> Self {
        MemoryGuard {
            require_noeviction: false,
            high_water: Some(0.9),
        }
    }
}

impl MemoryGuard {
    /// The default: warn of an eviction policy, refuse adds above 90 % of `maxmemory`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `build` fails (with [`Error::EvictionPolicy`](crate::Error::EvictionPolicy))
    /// when Redis's `maxmemory-policy` is not `noeviction`, instead of logging an error.
    pub fn require_noeviction(mut self, require: bool) -> Self {
        self.require_noeviction = require;
        self
    }

    /// The share of `maxmemory` (between 0 and 1) above which adds are refused.
    pub fn high_water(mut self, fraction: f64) -> Self {
        self.high_water = Some(fraction);
        self
    }

    /// No high-water mark: adds are never refused for memory (the policy is still read).
    pub fn without_high_water(mut self) -> Self {
        self.high_water = None;
        self
    }

    pub(crate) fn check(&self) -> Result<(), Error> {
        match self.high_water {
            Some(f) if !(f > 0.0 && f <= 1.0) => Err(Error::invalid(
                "memory_guard",
                format!("high_water must be a share of maxmemory in (0, 1], not {f}"),
            )),
            _ => Ok(()),
        }
    }
}

/// What `INFO memory` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RedisMemory {
    pub(crate) used: u64,
    /// 0: no limit.
    pub(crate) max: u64,
    pub(crate) policy: String,
}

impl RedisMemory {
    /// From an `INFO memory` answer; `None` when its fields are missing (a server that
    /// hides them).
    pub(crate) fn from_info(info: &str) -> Option<Self> {
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        Some(RedisMemory {
            used: field("used_memory")?.parse().ok()?,
            max: field("maxmemory")?.parse().ok()?,
            policy: field("maxmemory_policy")?.to_owned(),
        })
    }

    pub(crate) async fn read(conn: &Connection) -> Result<Self, Error> {
        let info: String = conn.query(redis::cmd("INFO").arg("memory")).await?;
        RedisMemory::from_info(&info).ok_or_else(|| {
            Error::Redis("INFO memory has no used_memory, maxmemory or maxmemory_policy".into())
        })
    }
}

/// The guard at work: the last reading, and whether adds are refused.
#[derive(Debug)]
pub(crate) struct MemoryWatch {
    settings: MemoryGuard,
    url: String,
    over: AtomicBool,
    used: AtomicU64,
    max: AtomicU64,
    policy: Mutex<String>,
    /// Whether the last poll failed (Redis down): the last reading stands.
    stale: AtomicBool,
}

/// The guard's state for probes and metrics.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MemoryState {
    pub(crate) used: u64,
    pub(crate) max: u64,
    pub(crate) policy: String,
    pub(crate) over: bool,
    pub(crate) high_water: Option<f64>,
}

impl AddGate for MemoryWatch {
    /// Refuses an add while memory is above the mark.
    fn admit(&self) -> Result<(), Error> {
        if !self.over.load(Ordering::Relaxed) {
            return Ok(());
        }
        Err(Error::RedisMemoryHigh {
            used: self.used.load(Ordering::Relaxed),
            max: self.max.load(Ordering::Relaxed),
            retry_after: RETRY_AFTER,
        })
    }
}

impl MemoryWatch {
    /// Reads Redis once and checks its eviction policy; `None` when Redis does not say
    /// (a managed Redis may hide `INFO`: then the guard is off, with a warning).
    pub(crate) async fn start(
        conn: &Connection,
        settings: MemoryGuard,
    ) -> Result<Option<Arc<Self>>, Error> {
        settings.check()?;
        let url = conn.display_url().to_owned();
        let first = match RedisMemory::read(conn).await {
            Ok(first) => first,
            Err(e) => {
                tracing::warn!(url, error = %e, "cannot read Redis's memory settings (INFO memory); the memory guard is off");
                return Ok(None);
            }
        };
        if first.policy != "noeviction" {
            if settings.require_noeviction {
                return Err(Error::EvictionPolicy {
                    url,
                    policy: first.policy,
                });
            }
            tracing::error!(
                url,
                policy = first.policy,
                "Redis's maxmemory-policy is `{}`, not `noeviction`: when Redis is full it deletes keys, jobs among them, without a word. Set `maxmemory-policy noeviction` (CONFIG SET maxmemory-policy noeviction, and in redis.conf)",
                first.policy
            );
        }
        let watch = Arc::new(MemoryWatch {
            settings,
            url,
            over: AtomicBool::new(false),
            used: AtomicU64::new(0),
            max: AtomicU64::new(0),
            policy: Mutex::new(String::new()),
            stale: AtomicBool::new(false),
        });
        watch.record(&first);
        if settings.high_water.is_some() {
            tokio::spawn(poll(conn.clone(), Arc::downgrade(&watch)));
        }
        Ok(Some(watch))
    }

    fn record(&self, memory: &RedisMemory) {
        self.used.store(memory.used, Ordering::Relaxed);
        self.max.store(memory.max, Ordering::Relaxed);
        *self.policy.lock().unwrap_or_else(PoisonError::into_inner) = memory.policy.clone();
        let over = match self.settings.high_water {
            Some(fraction) if memory.max > 0 => memory.used as f64 >= memory.max as f64 * fraction,
            _ => false,
        };
        let was = self.over.swap(over, Ordering::Relaxed);
        if over && !was {
            tracing::error!(
                url = self.url,
                used = memory.used,
                max = memory.max,
                "Redis memory is above the high-water mark: adds are refused and the outbox keeps its rows until it falls. Remove finished jobs (remove_on_complete / remove_on_fail) or give Redis more memory"
            );
        } else if was && !over {
            tracing::info!(
                url = self.url,
                used = memory.used,
                max = memory.max,
                "Redis memory is below the high-water mark again: adds are accepted"
            );
        }
    }

    pub(crate) fn state(&self) -> MemoryState {
        MemoryState {
            used: self.used.load(Ordering::Relaxed),
            max: self.max.load(Ordering::Relaxed),
            policy: self
                .policy
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            over: self.over.load(Ordering::Relaxed),
            high_water: self.settings.high_water,
        }
    }
}

/// Reads Redis's memory every [`POLL_EVERY`] while the app lives.
async fn poll(conn: Connection, watch: Weak<MemoryWatch>) {
    let mut every = tokio::time::interval(POLL_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    every.tick().await;
    loop {
        every.tick().await;
        let reading = RedisMemory::read(&conn).await;
        let Some(watch) = watch.upgrade() else { return };
        match reading {
            Ok(memory) => {
                watch.stale.store(false, Ordering::Relaxed);
                watch.record(&memory);
            }
            // Redis down: the connection's own reports say so; the last reading stands.
            Err(e) => {
                if !watch.stale.swap(true, Ordering::Relaxed) {
                    tracing::debug!(error = %e, "the memory guard cannot read Redis's memory");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_used_max_and_policy_of_an_info_answer() {
        let info = "# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nmaxmemory:4194304\r\nmaxmemory_human:4.00M\r\nmaxmemory_policy:allkeys-lru\r\n";
        assert_eq!(
            RedisMemory::from_info(info),
            Some(RedisMemory {
                used: 1_048_576,
                max: 4_194_304,
                policy: "allkeys-lru".to_owned()
            })
        );
        assert_eq!(
            RedisMemory::from_info("# Memory\r\nused_memory_rss:3\r\n"),
            None
        );
    }

    #[test]
    fn a_high_water_mark_must_be_a_share() {
        assert!(MemoryGuard::new().high_water(0.8).check().is_ok());
        assert!(MemoryGuard::new().high_water(1.0).check().is_ok());
        for bad in [0.0, -0.5, 1.5, f64::NAN] {
            assert!(MemoryGuard::new().high_water(bad).check().is_err(), "{bad}");
        }
    }
}
