//! What most users need: `use queue_core::prelude::*;`.

pub use serde::{Deserialize, Serialize};

pub use crate::{
    Backoff, ChildResults, Dep, Job, JobError, JobOptions, JobState, Keep, OnChildFailure,
    Processor, Queue, QueueApp, WorkerEvent,
};
