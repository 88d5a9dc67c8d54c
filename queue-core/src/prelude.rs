//! What most users need: `use queue_core::prelude::*;`.

pub use serde::{Deserialize, Serialize};

pub use crate::{
    Backoff, Dep, Job, JobError, JobOptions, JobState, Keep, Processor, Queue, QueueApp,
    WorkerEvent,
};
