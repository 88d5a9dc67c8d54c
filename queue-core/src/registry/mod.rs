//! What the app runs: the registrations (macro records and explicit processors),
//! checked at start-up and merged per queue.

mod records;
mod validate;

use std::collections::BTreeMap;
use std::time::Duration;

pub(crate) use records::Registered;
pub use records::{
    Instance, JobTypeRecord, MakeInstance, ProcessorRecord, ProducerRecord, QueueListenerRecord,
    TypeInfo, WorkerListenerRecord,
};
pub(crate) use validate::{check_registrations, merge_processors};

use crate::handler::ErasedHandler;

/// One queue's worker plan: its settings and a handler per job name.
#[derive(Debug, Clone)]
pub(crate) struct QueuePlan {
    pub(crate) queue: String,
    pub(crate) concurrency: usize,
    pub(crate) lock_duration: Option<Duration>,
    pub(crate) limiter: Option<(u64, Duration)>,
    /// Set when the queue's jobs are taken by group, with each group's limits.
    pub(crate) groups: Option<crate::GroupLimits>,
    pub(crate) stalled_interval: Option<Duration>,
    pub(crate) max_stalled_count: Option<u32>,
    pub(crate) cancel_grace: Duration,
    /// Fail jobs with a name no handler takes at once, instead of as retryable.
    pub(crate) fail_unknown_names: bool,
    /// BullMQ's per-minute metrics: how many minutes to keep, when recorded.
    pub(crate) metrics_data_points: Option<usize>,
    /// The engine event channel's capacity, when a test asks for another.
    pub(crate) event_capacity: Option<usize>,
    pub(crate) by_name: BTreeMap<String, PlannedHandler>,
    pub(crate) fallback: Option<PlannedHandler>,
}

/// A handler with the timeout of the processor that registered it.
#[derive(Debug, Clone)]
pub(crate) struct PlannedHandler {
    pub(crate) handler: ErasedHandler,
    pub(crate) timeout: Option<Duration>,
}

impl QueuePlan {
    /// The handler for a job name: the one that claims it, else the catch-all.
    pub(crate) fn handler_for(&self, job_name: &str) -> Option<&PlannedHandler> {
        self.by_name.get(job_name).or(self.fallback.as_ref())
    }

    /// The `name` label of a job's metrics: its name when a handler is registered for
    /// it by name, else `*` (names from other producers are unbounded).
    #[cfg(feature = "metrics")]
    pub(crate) fn metric_name<'a>(&'a self, job_name: &str) -> &'a str {
        self.by_name
            .get_key_value(job_name)
            .map_or(crate::metrics::ANY_JOB_NAME, |(name, _)| name.as_str())
    }

    /// The job names this queue handles, for an "unknown job name" message.
    pub(crate) fn known_names(&self) -> String {
        let names: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    }

    /// Every handler with the job name it claims (`*` for the catch-all).
    pub(crate) fn handlers(&self) -> impl Iterator<Item = (&str, &PlannedHandler)> {
        self.by_name
            .iter()
            .map(|(name, h)| (name.as_str(), h))
            .chain(self.fallback.iter().map(|h| ("*", h)))
    }
}

/// The plan of `queue` (its name in Redis) among `plans`, if it is processed.
pub(crate) fn plan_of<'a>(plans: &'a [QueuePlan], queue: &str) -> Option<&'a QueuePlan> {
    plans.iter().find(|p| p.queue == queue)
}

/// A `#[processor]` record as an explicit `Processor`, so both kinds go through the
/// same checks.
pub(crate) fn processor_from_record(record: &ProcessorRecord) -> crate::Processor {
    let mut processor =
        crate::Processor::new(record.queue).concurrency(record.concurrency.unwrap_or(1));
    if let Some(ms) = record.timeout_ms {
        processor = processor.timeout(Duration::from_millis(ms));
    }
    if let Some(ms) = record.lock_duration_ms {
        processor = processor.lock_duration(Duration::from_millis(ms));
    }
    if let Some((max, per_ms)) = record.limiter {
        processor = processor.limiter(max, Duration::from_millis(per_ms));
    }
    if let Some(points) = record.per_minute_metrics {
        processor = processor.per_minute_metrics(points);
    }
    for queue in record.also_serve {
        processor = processor.also_serve(*queue);
    }
    processor.erased(record.job, (record.handler)(), record.label)
}
