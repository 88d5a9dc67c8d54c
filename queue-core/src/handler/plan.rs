//! A queue's plan: its worker options and which handler takes each job name. Made by
//! the app from its registrations at start-up; read by the workers, and by an inline
//! app's runner.

use std::collections::BTreeMap;
use std::time::Duration;

use super::ErasedHandler;
use crate::options::WorkerOptions;

/// The label of job names no handler is registered for by name (a catch-all handler
/// takes them): other producers may send any name, and each would be a new series.
#[cfg(feature = "metrics")]
pub const ANY_JOB_NAME: &str = "*";

/// One queue's worker plan: its settings and a handler per job name.
#[derive(Debug, Clone)]
pub(crate) struct QueuePlan {
    /// The queue's name in Redis.
    pub(crate) queue: String,
    pub(crate) options: WorkerOptions,
    pub(crate) by_name: BTreeMap<String, PlannedHandler>,
    pub(crate) fallback: Option<PlannedHandler>,
}

/// A handler with the timeout of the processor that registered it.
#[derive(Debug, Clone)]
pub(crate) struct PlannedHandler {
    pub(crate) handler: ErasedHandler,
    pub(crate) timeout: Option<Duration>,
    /// Where it was registered (`queue/job (path::to::fn)`), for messages.
    pub(crate) label: String,
}

impl QueuePlan {
    /// The handler for a job name: the one that claims it, else the catch-all.
    pub(crate) fn handler_for(&self, job_name: &str) -> Option<&PlannedHandler> {
        self.by_name.get(job_name).or(self.fallback.as_ref())
    }

    /// The `name` label of a job's metrics: its name when a handler is registered for
    /// it by name, else [`ANY_JOB_NAME`].
    #[cfg(feature = "metrics")]
    pub(crate) fn metric_name<'a>(&'a self, job_name: &str) -> &'a str {
        self.by_name
            .get_key_value(job_name)
            .map_or(ANY_JOB_NAME, |(name, _)| name.as_str())
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
