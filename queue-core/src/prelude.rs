//! What most users need: `use queue_core::prelude::*;`, the attribute macros included
//! (feature `macros`, on by default).

pub use serde::{Deserialize, Serialize};

pub use crate::events::{EventJob, JobFailure};
pub use crate::worker::{Batch, BatchResult};
pub use crate::{
    Backoff, ChildResults, Dep, Job, JobError, JobOptions, JobOutcome, JobState, JobType,
    OnChildFailure, Processor, Queue, QueueApp, QueueEvent, QueueType, Retention, WorkerEvent,
};

/// The old name of [`Retention`], as the prelude gave it.
#[allow(deprecated)]
pub use crate::options::Keep;

#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use crate::{inject_queue, job, job_queue, on_queue_event, on_worker_event, processor};
