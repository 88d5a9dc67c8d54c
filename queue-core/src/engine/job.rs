//! A running job's link to Redis: progress and log writes.

use std::sync::Arc;

use bullmq::JobProgress;
use futures::future::BoxFuture;
use tokio::sync::Mutex;

use super::connection::Connection;
use super::convert::engine_error;
use crate::error::Error;
use crate::job::{JobWriter, RawChildren};

/// The engine's job, shared by the handler's `Job<T>` for progress and logs, with the
/// connection and queue it came from, for what the engine's job cannot do itself.
/// Made once per attempt: one allocation, nothing copied.
pub(crate) struct LiveJob {
    job: Mutex<bullmq::Job>,
    queue: Arc<str>,
    conn: Arc<Connection>,
}

impl LiveJob {
    pub(super) fn new(job: bullmq::Job, queue: Arc<str>, conn: Arc<Connection>) -> Self {
        LiveJob {
            job: Mutex::new(job),
            queue,
            conn,
        }
    }

    async fn id(&self) -> String {
        self.job.lock().await.id().to_owned()
    }
}

/// A Redis hash as field-value pairs.
type Fields = Vec<(String, String)>;

/// A child's return value as BullMQ stores it: JSON, or (from a producer that wrote
/// something else) the raw string.
fn stored_value(raw: String) -> serde_json::Value {
    serde_json::from_str(&raw).unwrap_or(serde_json::Value::String(raw))
}

impl JobWriter for LiveJob {
    fn update_progress(&self, value: serde_json::Value) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            // `Object` is stored as the JSON value itself, so `42` stays `42` (not `42.0`).
            let progress = JobProgress::Object(value);
            self.job
                .lock()
                .await
                .update_progress(progress)
                .await
                .map_err(engine_error)
        })
    }

    fn children(&self) -> BoxFuture<'_, Result<RawChildren, Error>> {
        Box::pin(async move {
            // Both hashes BullMQ keeps on the parent, in one round trip: `processed`
            // (child key -> return value) and `failed` (child key -> reason, for the
            // failures the parent may pass).
            let id = self.id().await;
            let key = format!("{}:{}", self.conn.queue_base(&self.queue), id);
            let mut pipe = redis::pipe();
            pipe.cmd("HGETALL").arg(format!("{key}:processed"));
            pipe.cmd("HGETALL").arg(format!("{key}:failed"));
            let (completed, failed): (Fields, Fields) = self.conn.pipeline(&pipe).await?;
            Ok(RawChildren {
                completed: completed
                    .into_iter()
                    .map(|(k, v)| (k, stored_value(v)))
                    .collect(),
                failed,
            })
        })
    }

    fn remove_pending_children(&self) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            let queue = self.conn.engine_queue(&self.queue).await?;
            queue
                .remove_unprocessed_children(&self.id().await)
                .await
                .map_err(engine_error)
        })
    }

    fn log<'a>(&'a self, line: &'a str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            self.job
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
