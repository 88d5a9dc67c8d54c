//! A running job's link to Redis: progress and log writes.

use std::sync::Arc;

use bullmq::JobProgress;
use futures::future::BoxFuture;
use tokio::sync::Mutex;

use super::convert::engine_error;
use crate::error::Error;
use crate::job::JobWriter;

/// The engine's job, shared by the handler's `Job<T>` for progress and logs.
pub(crate) struct LiveJob(Arc<Mutex<bullmq::Job>>);

impl LiveJob {
    pub(super) fn new(job: bullmq::Job) -> Self {
        LiveJob(Arc::new(Mutex::new(job)))
    }
}

impl JobWriter for LiveJob {
    fn update_progress(&self, value: serde_json::Value) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            // `Object` is stored as the JSON value itself, so `42` stays `42` (not `42.0`).
            let progress = JobProgress::Object(value);
            self.0
                .lock()
                .await
                .update_progress(progress)
                .await
                .map_err(engine_error)
        })
    }

    fn log<'a>(&'a self, line: &'a str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            self.0
                .lock()
                .await
                .log(line)
                .await
                .map(drop)
                .map_err(engine_error)
        })
    }
}

impl std::fmt::Debug for LiveJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveJob")
    }
}
