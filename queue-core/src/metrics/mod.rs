//! Prometheus metrics: what the workers of this process did, and how deep each queue
//! is, rendered in the OpenMetrics text format for a scrape.
//!
//! Built on `prometheus-client` (the Prometheus project's own Rust client) rather than
//! the `metrics` facade: the registry is the app's value, not a process global, so two
//! apps (or two tests) in one process do not mix their figures; label sets are types,
//! so what can become a label is fixed in this file; and queue depth is read when a
//! scrape asks, which a push-style facade cannot express.
//!
//! Labels are bounded by construction: `queue` is a queue this app runs or knows, and
//! `name` is a job name one of its handlers is registered for, or `*` for jobs a
//! catch-all handler takes (any name another producer may send). Job ids, payloads and
//! failure reasons are never labels.
//!
//! ```no_run
//! # async fn demo() -> queue_core::Result<()> {
//! use queue_core::{metrics::Metrics, QueueApp};
//!
//! let metrics = Metrics::new();
//! let app = QueueApp::builder().metrics(metrics.clone()).build().await?;
//! let workers = app.start_workers().await?;
//! // What `GET /metrics` answers (queue-axum's `metrics_route` serves it):
//! let text = metrics.render(&app).await?;
//! assert!(text.contains("bullmq_job_count"));
//! # drop(workers); Ok(()) }
//! ```

mod depth;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::error::Error;
use crate::queue::Queue;

/// How long a queue's counts serve scrapes before they are read again.
pub const DEPTH_CACHE_FOR: Duration = Duration::from_secs(1);

/// When each queue's counts were last read.
#[derive(Debug, Default)]
struct DepthCache {
    read_at: HashMap<String, Instant>,
}

/// What a scrape reads besides the queues' depth and what the workers recorded.
#[derive(Debug, Default)]
pub(crate) struct ScrapeSources {
    /// The outbox, for its backlog.
    #[cfg(feature = "sqlx")]
    pub(crate) outbox: Option<crate::store::Outbox>,
    /// Redis's memory, as the guard last read it: used, max, and whether adds are
    /// refused.
    pub(crate) memory: Option<MemoryReading>,
}

/// Redis's memory as the guard last read it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MemoryReading {
    pub(crate) used: u64,
    pub(crate) max: u64,
    pub(crate) over: bool,
}

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub use crate::handler::ANY_JOB_NAME;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabels {
    queue: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    queue: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutboxLabels {
    state: String,
}

/// The app's metrics: a cheap handle (clones share the figures).
///
/// Give it to [`QueueAppBuilder::metrics`](crate::QueueAppBuilder::metrics); the workers
/// then record into it, and [`Metrics::render`] answers a scrape.
///
/// | metric | type | labels |
/// |---|---|---|
/// | `queue_jobs_completed_total` | counter | queue, name |
/// | `queue_jobs_failed_total` (failed for good) | counter | queue, name |
/// | `queue_jobs_retried_total` (an attempt failed, another follows) | counter | queue, name |
/// | `queue_jobs_timed_out_total` (attempts cut by their timeout) | counter | queue, name |
/// | `queue_jobs_stalled_total` (run again after a lost run) | counter | queue, name |
/// | `queue_jobs_lock_lost_total` (runs stopped: another run holds the job) | counter | queue, name |
/// | `queue_attempt_duration_seconds` | histogram | queue, name |
/// | `queue_job_wait_seconds` (due to first start) | histogram | queue, name |
/// | `queue_worker_active_jobs` | gauge | queue |
/// | `queue_worker_concurrency` | gauge | queue |
/// | `queue_worker_events_dropped_total` (engine events not read in time) | counter | queue |
/// | `queue_jobs` (depth, when scraped) | gauge | queue, state |
/// | `bullmq_job_count` (the same, under Node BullMQ's name) | gauge | queue, state |
/// | `queue_outbox_rows` (the outbox backlog: `pending`, `set_aside`) | gauge | state |
/// | `queue_redis_memory_used_bytes`, `queue_redis_memory_max_bytes` (the memory guard's last reading) | gauge | |
/// | `queue_redis_memory_high` (1 while adds are refused for memory) | gauge | |
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    completed: Family<JobLabels, Counter>,
    failed: Family<JobLabels, Counter>,
    retried: Family<JobLabels, Counter>,
    timed_out: Family<JobLabels, Counter>,
    stalled: Family<JobLabels, Counter>,
    lock_lost: Family<JobLabels, Counter>,
    duration: Family<JobLabels, Histogram>,
    wait: Family<JobLabels, Histogram>,
    active: Family<QueueLabels, Gauge>,
    concurrency: Family<QueueLabels, Gauge>,
    events_dropped: Family<QueueLabels, Counter>,
    depth: Family<StateLabels, Gauge>,
    bullmq_depth: Family<StateLabels, Gauge>,
    #[cfg_attr(not(feature = "sqlx"), allow(dead_code))]
    outbox: Family<OutboxLabels, Gauge>,
    memory_used: Gauge,
    memory_max: Gauge,
    memory_high: Gauge,
    depth_cache: Mutex<DepthCache>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Seconds, from 1 ms to about 33 minutes, doubling.
fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 22))
}

impl Metrics {
    /// An empty set of metrics, with every family registered.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let completed = Family::default();
        let failed = Family::default();
        let retried = Family::default();
        let timed_out = Family::default();
        let stalled = Family::default();
        let lock_lost = Family::default();
        let events_dropped = Family::default();
        let duration = Family::new_with_constructor(seconds_histogram as fn() -> Histogram);
        let wait = Family::new_with_constructor(seconds_histogram as fn() -> Histogram);
        let active = Family::default();
        let concurrency = Family::default();
        let depth = Family::default();
        let bullmq_depth = Family::default();
        let outbox = Family::default();
        registry.register("queue_jobs_completed", "Jobs completed", completed.clone());
        registry.register(
            "queue_jobs_failed",
            "Jobs failed for good (no attempt left, or unrecoverable)",
            failed.clone(),
        );
        registry.register(
            "queue_jobs_retried",
            "Attempts that failed and will be retried",
            retried.clone(),
        );
        registry.register(
            "queue_jobs_timed_out",
            "Attempts cut off by their timeout",
            timed_out.clone(),
        );
        registry.register(
            "queue_jobs_stalled",
            "Jobs run again because an earlier run was lost (a stall)",
            stalled.clone(),
        );
        registry.register(
            "queue_jobs_lock_lost",
            "Runs stopped because another run holds their job (their lock was lost)",
            lock_lost.clone(),
        );
        registry.register(
            "queue_worker_events_dropped",
            "Engine events this process's worker dropped because they were not read in \
             time (worker events and listeners missed them; jobs were not affected)",
            events_dropped.clone(),
        );
        registry.register(
            "queue_attempt_duration_seconds",
            "How long an attempt ran",
            duration.clone(),
        );
        registry.register(
            "queue_job_wait_seconds",
            "From when a job was due (added, or its delay over) to its attempt's start",
            wait.clone(),
        );
        registry.register(
            "queue_worker_active_jobs",
            "Attempts running in this process",
            active.clone(),
        );
        registry.register(
            "queue_worker_concurrency",
            "The concurrency of this process's worker",
            concurrency.clone(),
        );
        registry.register(
            "queue_jobs",
            "Jobs in the queue by state, read when scraped",
            depth.clone(),
        );
        registry.register(
            "bullmq_job_count",
            "Number of jobs in the queue by state",
            bullmq_depth.clone(),
        );
        registry.register(
            "queue_outbox_rows",
            "Rows in the transactional outbox: pending, or set aside",
            outbox.clone(),
        );
        let (memory_used, memory_max, memory_high) =
            (Gauge::default(), Gauge::default(), Gauge::default());
        registry.register(
            "queue_redis_memory_used_bytes",
            "Redis's used_memory at the memory guard's last reading",
            memory_used.clone(),
        );
        registry.register(
            "queue_redis_memory_max_bytes",
            "Redis's maxmemory (0: no limit)",
            memory_max.clone(),
        );
        registry.register(
            "queue_redis_memory_high",
            "1 while Redis's memory is above the guard's high-water mark and adds are refused",
            memory_high.clone(),
        );
        Metrics {
            inner: Arc::new(Inner {
                registry,
                completed,
                failed,
                retried,
                timed_out,
                stalled,
                lock_lost,
                duration,
                wait,
                active,
                concurrency,
                events_dropped,
                depth,
                bullmq_depth,
                outbox,
                memory_used,
                memory_max,
                memory_high,
                depth_cache: Mutex::new(DepthCache::default()),
            }),
        }
    }

    /// The metrics as OpenMetrics text: the depth of `queues` (each read at most once
    /// per [`DEPTH_CACHE_FOR`]), then what `sources` say, then everything recorded.
    pub(crate) async fn render_from(
        &self,
        queues: &[Queue<serde_json::Value>],
        sources: ScrapeSources,
    ) -> Result<String, Error> {
        self.refresh_depth(queues).await?;
        #[cfg(feature = "sqlx")]
        if let Some(outbox) = sources.outbox {
            let counts = outbox.counts().await?;
            self.set_outbox(counts.pending, counts.set_aside);
        }
        if let Some(memory) = sources.memory {
            let bytes = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            self.inner.memory_used.set(bytes(memory.used));
            self.inner.memory_max.set(bytes(memory.max));
            self.inner.memory_high.set(i64::from(memory.over));
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.inner.registry)
            .map_err(|e| Error::invalid("metrics", format!("cannot encode: {e}")))?;
        Ok(text)
    }

    /// A recorder for one queue's worker.
    pub(crate) fn for_queue(&self, queue: &str, concurrency: usize) -> QueueMetrics {
        let labels = QueueLabels {
            queue: queue.to_owned(),
        };
        self.inner
            .concurrency
            .get_or_create(&labels)
            .set(i64::try_from(concurrency).unwrap_or(i64::MAX));
        QueueMetrics {
            metrics: self.clone(),
            queue: queue.to_owned(),
            active: self.inner.active.get_or_create(&labels).clone(),
        }
    }

    #[cfg(feature = "sqlx")]
    fn set_outbox(&self, pending: u64, set_aside: u64) {
        for (state, n) in [("pending", pending), ("set_aside", set_aside)] {
            let labels = OutboxLabels {
                state: state.to_owned(),
            };
            self.inner
                .outbox
                .get_or_create(&labels)
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, DepthCache> {
        self.inner
            .depth_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// One queue's recorder, held by its worker's dispatcher.
#[derive(Clone)]
pub(crate) struct QueueMetrics {
    metrics: Metrics,
    queue: String,
    active: Gauge,
}

/// How an attempt ended, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttemptEnd {
    Completed,
    /// Failed, and another attempt follows.
    Retried {
        timed_out: bool,
    },
    /// Failed for good.
    Failed {
        timed_out: bool,
    },
    /// Stopped: another run holds the job now.
    LockLost,
}

impl QueueMetrics {
    fn labels(&self, name: &str) -> JobLabels {
        JobLabels {
            queue: self.queue.clone(),
            name: name.to_owned(),
        }
    }

    /// An attempt starts: `waited` since the job was due (first attempts only);
    /// `stalled` when an earlier run of it was lost.
    pub(crate) fn started(&self, name: &str, waited: Option<Duration>, stalled: bool) {
        self.active.inc();
        let inner = &self.metrics.inner;
        let labels = self.labels(name);
        if let Some(waited) = waited {
            inner
                .wait
                .get_or_create(&labels)
                .observe(waited.as_secs_f64());
        }
        if stalled {
            inner.stalled.get_or_create(&labels).inc();
        }
    }

    /// The engine dropped `count` of this worker's events.
    pub(crate) fn events_dropped(&self, count: u64) {
        let labels = QueueLabels {
            queue: self.queue.clone(),
        };
        self.metrics
            .inner
            .events_dropped
            .get_or_create(&labels)
            .inc_by(count);
    }

    /// An attempt ended after `ran`.
    pub(crate) fn ended(&self, name: &str, ran: Duration, end: AttemptEnd) {
        self.active.dec();
        let inner = &self.metrics.inner;
        let labels = self.labels(name);
        inner
            .duration
            .get_or_create(&labels)
            .observe(ran.as_secs_f64());
        let (counter, timed_out) = match end {
            AttemptEnd::Completed => (&inner.completed, false),
            AttemptEnd::LockLost => (&inner.lock_lost, false),
            AttemptEnd::Retried { timed_out } => (&inner.retried, timed_out),
            AttemptEnd::Failed { timed_out } => (&inner.failed, timed_out),
        };
        counter.get_or_create(&labels).inc();
        if timed_out {
            inner.timed_out.get_or_create(&labels).inc();
        }
    }
}
