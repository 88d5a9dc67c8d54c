//! What most users need: `use queue_core::prelude::*;`, the attribute macros included
//! (feature `macros`, on by default).

pub use serde::{Deserialize, Serialize};

pub use crate::{
    Backoff, ChildResults, Dep, EventJob, Job, JobError, JobFailure, JobOptions, JobOutcome,
    JobState, JobType, Keep, OnChildFailure, Processor, Queue, QueueApp, QueueEvent, QueueType,
    WorkerEvent,
};

#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use crate::{inject_queue, job, job_queue, on_queue_event, on_worker_event, processor};
