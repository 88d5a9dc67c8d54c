//! Where the app's work goes: Redis, through the engine ([`engine`], the only module
//! that names `bullmq`), or, in an app built inline for tests, a runner that calls each
//! job's handler when it is added ([`inline`]). [`Backend`] and [`QueueBackend`] are
//! the one place that tells the two apart: the services above call them and never ask
//! which runs. The inline runner stands in for adds (and claims); what only Redis can
//! do fails there with [`Error::Inline`], named by [`Backend::redis`].

mod claims;
mod engine;
mod inline;
mod queue;

use std::sync::Arc;

pub(crate) use claims::ClaimStore;
pub use claims::{Claim, ClaimToken};
pub(crate) use engine::{
    add_flow, bounded_stack, AttemptFailure, Backlog, Connection, Endpoint, EngineEvent,
    EngineQueue, EngineQueueEvents, EngineWorker, EventSink, ProcessFn, RawAttempt, WorkerSettings,
    STACK_TEXT_LIMIT,
};
pub(crate) use inline::InlineRunner;
pub use inline::{InlineJob, InlineOutcome};
pub(crate) use queue::{AddOutcome, QueueBackend};

use crate::error::Error;

/// What an inline app refuses when asked to start workers: it has none to start.
pub(crate) const START_WORKERS: &str =
    "start_workers (an inline app runs each job when it is added)";

/// What an inline app refuses when asked for a queue's Redis events.
pub(crate) const QUEUE_EVENTS: &str =
    "queue events (`queue_events`, `#[on_queue_event]` listeners)";

/// The app's backend: a Redis connection, or an inline app's runner.
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    /// Shared: every queue handle holds the app's backend.
    Redis(Arc<Connection>),
    Inline(Arc<InlineRunner>),
}

impl Backend {
    /// The key prefix.
    pub(crate) fn prefix(&self) -> &str {
        match self {
            Backend::Redis(conn) => conn.prefix(),
            Backend::Inline(runner) => runner.prefix(),
        }
    }

    /// What to call the backend in messages: the Redis URL, password redacted.
    pub(crate) fn display_url(&self) -> &str {
        match self {
            Backend::Redis(conn) => conn.display_url(),
            Backend::Inline(_) => "inline (no Redis)",
        }
    }

    /// Whether the app runs on a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Backend::Redis(conn) if conn.is_cluster())
    }

    /// The Redis connection, for what only Redis does; an inline app refuses
    /// `operation`, naming it.
    pub(crate) fn redis(&self, operation: &'static str) -> Result<&Connection, Error> {
        match self {
            Backend::Redis(conn) => Ok(conn),
            Backend::Inline(_) => Err(Error::Inline { operation }),
        }
    }

    /// The backend of one queue's calls.
    pub(crate) fn queue(&self, name: &str) -> QueueBackend {
        match self {
            Backend::Redis(conn) => QueueBackend::redis(conn.clone(), name),
            Backend::Inline(runner) => QueueBackend::inline(runner.clone(), name),
        }
    }

    /// Claims under `base` (`<prefix>:<namespace>:`), each call within `timeout`.
    pub(crate) fn claims(&self, base: String, timeout: std::time::Duration) -> ClaimStore {
        match self {
            Backend::Redis(conn) => ClaimStore::redis(conn.clone(), base, timeout),
            Backend::Inline(runner) => ClaimStore::memory(runner.claims(), base),
        }
    }

    /// What an inline app's jobs did, in the order they finished; none for Redis.
    pub(crate) fn inline_jobs(&self) -> Vec<InlineJob> {
        match self {
            Backend::Redis(_) => Vec::new(),
            Backend::Inline(runner) => runner.jobs(),
        }
    }
}
