//! A running job's link to Redis: progress and log writes.

use std::sync::Arc;

use bullmq::JobProgress;
use tokio::sync::Mutex;

use super::convert::engine_error;
use crate::error::Error;

/// The engine's job, shared by the handler's `Job<T>` for progress and logs.
#[derive(Clone)]
pub(crate) struct LiveJob(Arc<Mutex<bullmq::Job>>);

impl LiveJob {
    pub(super) fn new(job: bullmq::Job) -> Self {
        LiveJob(Arc::new(Mutex::new(job)))
    }

    pub(crate) async fn update_progress(&self, value: serde_json::Value) -> Result<(), Error> {
        // `Object` is stored as the JSON value itself, so `42` stays `42` (not `42.0`).
        let progress = JobProgress::Object(value);
        self.0
            .lock()
            .await
            .update_progress(progress)
            .await
            .map_err(engine_error)
    }

    pub(crate) async fn log(&self, line: &str) -> Result<(), Error> {
        self.0
            .lock()
            .await
            .log(line)
            .await
            .map(drop)
            .map_err(engine_error)
    }
}

impl std::fmt::Debug for LiveJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveJob")
    }
}
