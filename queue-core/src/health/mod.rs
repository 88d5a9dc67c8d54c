//! Health and readiness, as Kubernetes probes ask them: is this process able to serve
//! (ready), and is it still working (live)? Each answer is a [`HealthReport`]: every
//! check with its name, status and detail. `queue-axum` serves them as routes.
//!
//! - **Ready** when Redis answers, the workers this process runs have started, Redis's
//!   memory is below the guard's high-water mark ([`MemoryGuard`]), and the outbox relay
//!   (where there is one) keeps up within the lag the app sets. One `PING` per probe;
//!   the memory reading is the guard's, polled apart.
//! - **Live** unless a worker is wedged: jobs wait on its queue (and nothing holds the
//!   queue back: a pause, the rate limiter, its global concurrency), it has a free
//!   slot, and it has taken none for the period the app sets; or every slot is busy and
//!   its lock renewals stopped. A blocked thread under the fetch loop, a connection that
//!   never came back: a restart is the cure. A worker that took a job within the period
//!   costs Redis nothing; one that did not costs one round trip of O(1) commands. Redis
//!   unreachable is readiness's business, never a reason to restart a pod.

pub(crate) mod info;
mod memory;
pub(crate) mod roster;

use std::time::{Duration, Instant};

use futures::future::join_all;
use serde::Serialize;

pub use info::RedisInfo;

/// The old name of [`HealthCheck`].
#[deprecated(since = "0.2.0", note = "renamed `HealthCheck`")]
pub type Check = HealthCheck;
pub use memory::MemoryGuard;
pub(crate) use memory::{MemoryState, MemoryWatch};
pub(crate) use roster::Roster;
pub use roster::{ProcessInfo, ProcessWorker};

use std::sync::Arc;

use crate::backend::{Backend, Backlog};
use crate::worker::{is_suspect, PulseBoard, PulseReading};

/// A check's outcome. A report is `fail` when one of its checks fails, else `warn` when
/// one warns; only `fail` answers 503.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CheckStatus {
    /// Fine.
    Pass,
    /// Works, but something needs a person's attention (an eviction policy that may
    /// delete jobs, say).
    Warn,
    /// Broken: not ready, or not alive.
    Fail,
}

/// One check of a [`HealthReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct HealthCheck {
    /// What was checked: `redis`, `memory`, `outbox`, `worker:<queue>`.
    pub name: String,
    /// Its outcome.
    pub status: CheckStatus,
    /// What was seen, for a person.
    pub detail: String,
}

impl HealthCheck {
    fn new(name: impl Into<String>, status: CheckStatus, detail: impl Into<String>) -> Self {
        HealthCheck {
            name: name.into(),
            status,
            detail: detail.into(),
        }
    }
}

/// The answer of a probe: its overall status and each check.
///
/// ```
/// use queue_core::{health::CheckStatus, health::HealthReport};
///
/// let report = HealthReport::default();
/// assert_eq!(report.status, CheckStatus::Pass);
/// assert!(report.is_healthy());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct HealthReport {
    /// The worst of the checks' statuses (`pass` with no check).
    pub status: CheckStatus,
    /// Every check made.
    pub checks: Vec<HealthCheck>,
}

impl Default for HealthReport {
    fn default() -> Self {
        HealthReport {
            status: CheckStatus::Pass,
            checks: Vec::new(),
        }
    }
}

impl HealthReport {
    fn from_checks(checks: Vec<HealthCheck>) -> Self {
        let status = checks
            .iter()
            .map(|c| c.status)
            .max()
            .unwrap_or(CheckStatus::Pass);
        HealthReport { status, checks }
    }

    /// Whether the probe passes: no check failed (a warning passes).
    pub fn is_healthy(&self) -> bool {
        self.status != CheckStatus::Fail
    }
}

/// The app's probes, with the periods the app sets. Made by [`QueueApp::health`](crate::QueueApp::health); cheap
/// to clone.
///
/// ```no_run
/// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
/// use std::time::Duration;
/// use queue_core::health::HealthSettings;
///
/// let health = app.health(HealthSettings::new().wedged_after(Duration::from_secs(120)));
/// let workers = app.start_workers().await?;
/// assert!(health.ready().await.is_healthy());
/// assert!(health.live().await.is_healthy());
/// # let _ = workers; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Health {
    probed: Probed,
    settings: HealthSettings,
}

/// What the probes look at: the app's backend, its workers' pulses, its memory guard and
/// its outbox.
#[derive(Debug, Clone)]
pub(crate) struct Probed {
    pub(crate) backend: Backend,
    pub(crate) pulses: Arc<PulseBoard>,
    pub(crate) memory: Option<Arc<MemoryWatch>>,
    #[cfg(feature = "sqlx")]
    pub(crate) outbox: Option<crate::store::Outbox>,
}

/// The periods of the probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct HealthSettings {
    wedged_after: Duration,
    relay_lag: Duration,
    redis_timeout: Duration,
}

impl Default for HealthSettings {
    fn default() -> Self {
        HealthSettings {
            wedged_after: Duration::from_secs(60),
            relay_lag: Duration::from_secs(60),
            redis_timeout: Duration::from_secs(1),
        }
    }
}

impl HealthSettings {
    /// Defaults: a worker is wedged after 60 s without a take while jobs wait; the
    /// relay may lag 60 s; Redis must answer a probe within 1 s.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a worker with a free slot may take nothing while jobs wait on its queue
    /// before liveness fails (default 60 s).
    pub fn wedged_after(mut self, period: Duration) -> Self {
        self.wedged_after = period;
        self
    }

    /// How old the oldest due row of the outbox may be before readiness fails
    /// (default 60 s).
    pub fn relay_lag(mut self, lag: Duration) -> Self {
        self.relay_lag = lag;
        self
    }

    /// How long a probe waits for Redis (default 1 s).
    pub fn redis_timeout(mut self, timeout: Duration) -> Self {
        self.redis_timeout = timeout;
        self
    }
}

impl Health {
    pub(crate) fn new(probed: Probed, settings: HealthSettings) -> Self {
        Health { probed, settings }
    }

    /// Readiness: Redis answers, this process's workers have started, Redis's memory
    /// is below the high-water mark, the outbox relay keeps up.
    pub async fn ready(&self) -> HealthReport {
        let mut checks = vec![self.redis().await];
        let readings = self.probed.pulses.readings();
        let waiting: Vec<&str> = readings
            .iter()
            .filter(|r| !r.started)
            .map(|r| r.queue.as_str())
            .collect();
        if !readings.is_empty() {
            checks.push(if waiting.is_empty() {
                HealthCheck::new(
                    "workers",
                    CheckStatus::Pass,
                    format!("{} started", readings.len()),
                )
            } else {
                HealthCheck::new(
                    "workers",
                    CheckStatus::Fail,
                    format!("not started yet: {}", waiting.join(", ")),
                )
            });
        }
        if let Some(memory) = &self.probed.memory {
            checks.push(memory_check(&memory.state()));
        }
        #[cfg(feature = "sqlx")]
        if let Some(check) = self.outbox().await {
            checks.push(check);
        }
        HealthReport::from_checks(checks)
    }

    /// Liveness: no worker of this process is wedged.
    pub async fn live(&self) -> HealthReport {
        // Every worker at once: a probe takes one Redis timeout at the most, however
        // many queues are suspect.
        let checks = join_all(
            self.probed
                .pulses
                .readings()
                .into_iter()
                .map(|reading| self.worker_check(reading)),
        )
        .await;
        HealthReport::from_checks(checks)
    }

    /// One worker's liveness: by its pulse alone, or, when it is suspect, by whether
    /// jobs wait on its queue.
    async fn worker_check(&self, reading: PulseReading) -> HealthCheck {
        let name = format!("worker:{}", reading.queue);
        let busy = format!("{} of {} slots busy", reading.running, reading.concurrency);
        if !is_suspect(&reading, self.settings.wedged_after) {
            return HealthCheck::new(
                name,
                CheckStatus::Pass,
                format!("took a job {:?} ago; {busy}", round(reading.since_take)),
            );
        }
        let backlog = tokio::time::timeout(self.settings.redis_timeout, async {
            let conn = self.probed.backend.redis("the liveness probe")?;
            Backlog::read(conn, &reading.queue).await
        })
        .await;
        let (status, detail) = match backlog {
            Ok(Ok(backlog)) if backlog.ready == 0 => {
                (CheckStatus::Pass, format!("idle: nothing waits; {busy}"))
            }
            Ok(Ok(backlog)) => match backlog.held_back_by() {
                Some(reason) => (
                    CheckStatus::Pass,
                    format!("{} jobs wait, held back: {reason}", backlog.ready),
                ),
                None => (
                    CheckStatus::Fail,
                    format!(
                        "wedged: {} jobs wait and none was taken for {:?}; {busy}",
                        backlog.ready,
                        round(reading.since_take)
                    ),
                ),
            },
            // Redis is readiness's business: a restart would not bring it back.
            Ok(Err(e)) => (
                CheckStatus::Pass,
                format!("cannot ask Redis whether jobs wait ({e}); {busy}"),
            ),
            Err(_) => (
                CheckStatus::Pass,
                format!(
                    "Redis did not answer within {:?} whether jobs wait; {busy}",
                    self.settings.redis_timeout
                ),
            ),
        };
        HealthCheck::new(name, status, detail)
    }

    /// The relay's lag: how long the oldest pending row of the outbox has waited (one
    /// query of the database, on an index).
    #[cfg(feature = "sqlx")]
    async fn outbox(&self) -> Option<HealthCheck> {
        let outbox = self.probed.outbox.as_ref()?;
        let counts = tokio::time::timeout(self.settings.redis_timeout, outbox.counts()).await;
        Some(match counts {
            Ok(Ok(counts)) => match counts.oldest_pending {
                None => HealthCheck::new("outbox", CheckStatus::Pass, "no row waits"),
                Some(age) if age <= self.settings.relay_lag => HealthCheck::new(
                    "outbox",
                    CheckStatus::Pass,
                    format!(
                        "{} rows wait, the oldest for {:?}",
                        counts.pending,
                        round(age)
                    ),
                ),
                Some(age) => HealthCheck::new(
                    "outbox",
                    CheckStatus::Fail,
                    format!(
                        "the relay lags: {} rows wait, the oldest for {:?} (more than {:?})",
                        counts.pending,
                        round(age),
                        self.settings.relay_lag
                    ),
                ),
            },
            Ok(Err(e)) => HealthCheck::new("outbox", CheckStatus::Fail, e.to_string()),
            Err(_) => HealthCheck::new(
                "outbox",
                CheckStatus::Fail,
                format!(
                    "the database did not answer within {:?}",
                    self.settings.redis_timeout
                ),
            ),
        })
    }

    async fn redis(&self) -> HealthCheck {
        let started = Instant::now();
        let ping = async {
            let conn = self.probed.backend.redis("the readiness probe")?;
            conn.query::<String>(&mut redis::cmd("PING")).await
        };
        match tokio::time::timeout(self.settings.redis_timeout, ping).await {
            Ok(Ok(_)) => HealthCheck::new(
                "redis",
                CheckStatus::Pass,
                format!("answered in {} ms", started.elapsed().as_millis()),
            ),
            Ok(Err(e)) => HealthCheck::new("redis", CheckStatus::Fail, e.to_string()),
            Err(_) => HealthCheck::new(
                "redis",
                CheckStatus::Fail,
                format!("no answer within {:?}", self.settings.redis_timeout),
            ),
        }
    }
}

fn memory_check(state: &MemoryState) -> HealthCheck {
    let usage = if state.max > 0 {
        format!(
            "{} of {} bytes ({:.0} %)",
            state.used,
            state.max,
            state.used as f64 * 100.0 / state.max as f64
        )
    } else {
        format!("{} bytes, no maxmemory", state.used)
    };
    if state.over {
        let mark = state.high_water.unwrap_or(1.0) * 100.0;
        return HealthCheck::new(
            "memory",
            CheckStatus::Fail,
            format!("{usage}: above the high-water mark ({mark:.0} %); adds are refused"),
        );
    }
    if state.policy != "noeviction" {
        return HealthCheck::new(
            "memory",
            CheckStatus::Warn,
            format!(
                "{usage}; maxmemory-policy is {}, which deletes jobs when Redis is full: set noeviction",
                state.policy
            ),
        );
    }
    HealthCheck::new("memory", CheckStatus::Pass, usage)
}

/// A duration to the tenth of a second, for a person.
fn round(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64 / 100 * 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_as_bad_as_its_worst_check() {
        let pass = HealthCheck::new("a", CheckStatus::Pass, "");
        let warn = HealthCheck::new("b", CheckStatus::Warn, "");
        let fail = HealthCheck::new("c", CheckStatus::Fail, "");
        let report = HealthReport::from_checks(vec![pass.clone(), warn.clone()]);
        assert_eq!(report.status, CheckStatus::Warn);
        assert!(report.is_healthy());
        let report = HealthReport::from_checks(vec![pass, fail, warn]);
        assert_eq!(report.status, CheckStatus::Fail);
        assert!(!report.is_healthy());
        assert!(HealthReport::from_checks(Vec::new()).is_healthy());
    }

    #[test]
    fn memory_above_the_mark_fails_and_an_evicting_policy_warns() {
        let state = |used, policy: &str| MemoryState {
            used,
            max: 1000,
            policy: policy.to_owned(),
            over: used >= 900,
            high_water: Some(0.9),
        };
        assert_eq!(
            memory_check(&state(100, "noeviction")).status,
            CheckStatus::Pass
        );
        assert_eq!(
            memory_check(&state(100, "allkeys-lru")).status,
            CheckStatus::Warn
        );
        let over = memory_check(&state(950, "noeviction"));
        assert_eq!(over.status, CheckStatus::Fail);
        assert!(over.detail.contains("95 %"), "{}", over.detail);
    }
}
