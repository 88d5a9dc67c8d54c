//! What the app runs: processors merged per queue, after the start-up checks.

mod validate;

use std::collections::BTreeMap;
use std::time::Duration;

pub(crate) use validate::plan_queues;
pub use validate::RegistryError;

use crate::handler::ErasedHandler;

/// One queue's worker plan: its settings and a handler per job name.
#[derive(Debug, Clone)]
pub(crate) struct QueuePlan {
    pub(crate) queue: String,
    pub(crate) concurrency: usize,
    pub(crate) lock_duration: Option<Duration>,
    pub(crate) limiter: Option<(u64, Duration)>,
    pub(crate) cancel_grace: Duration,
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

    /// The job names this queue handles, for an "unknown job name" message.
    pub(crate) fn known_names(&self) -> String {
        let names: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    }
}
