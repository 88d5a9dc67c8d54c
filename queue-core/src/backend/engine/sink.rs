//! What the engine reports while its workers run, to whoever runs them (the worker
//! runtime, `crate::worker`): the engine's own events and the lock keeper's, in our
//! terms but before the queue, job name and attempt facts are added.

use serde_json::Value;

/// One event of an engine worker.
#[derive(Debug, Clone)]
pub(crate) enum EngineEvent {
    Completed {
        job_id: String,
        result: Value,
    },
    Failed {
        job_id: String,
        reason: String,
    },
    Progress {
        job_id: String,
        progress: Value,
    },
    Stalled {
        job_id: String,
    },
    LockLost {
        job_id: String,
    },
    Drained,
    Error {
        message: String,
    },
    /// The engine's event channel was full: `count` more events were lost.
    Dropped {
        count: u64,
    },
}

/// Receives an engine worker's events.
pub(crate) trait EventSink: Send + Sync {
    /// Takes one event.
    fn deliver(&self, event: EngineEvent);
    /// Whether anyone listens to the events right now.
    fn listening(&self) -> bool;
}
