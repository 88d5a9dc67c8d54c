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
/// Made once per attempt, in a box of its worker's [`JobBoxes`]; nothing copied.
pub(crate) struct LiveJob {
    /// `None` only once dropped (the box goes back to `boxes`).
    job: Mutex<Option<JobBox>>,
    queue: Arc<str>,
    conn: Arc<Connection>,
    boxes: Arc<JobBoxes>,
}

/// A box for an engine job, empty between attempts.
type JobBox = Box<Option<bullmq::Job>>;

/// Boxes for the running attempts' engine jobs, reused from attempt to attempt. An
/// engine job is over a kilobyte, past what the allocator keeps per thread: a box of
/// its own per attempt took the allocator's slow path twice a job.
#[derive(Debug, Default)]
pub(super) struct JobBoxes(std::sync::Mutex<Vec<JobBox>>);

/// Empty boxes kept, at most (as many as attempts ran at once, up to this).
const KEPT_BOXES: usize = 128;

impl JobBoxes {
    fn boxed(&self, job: bullmq::Job) -> JobBox {
        let reused = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        match reused {
            Some(mut empty) => {
                *empty = Some(job);
                empty
            }
            None => Box::new(Some(job)),
        }
    }

    fn give_back(&self, mut boxed: JobBox) {
        // The job goes now, whatever becomes of its box.
        *boxed = None;
        let mut kept = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if kept.len() < KEPT_BOXES {
            kept.push(boxed);
        }
    }
}

impl LiveJob {
    pub(super) fn new(
        job: bullmq::Job,
        queue: Arc<str>,
        conn: Arc<Connection>,
        boxes: Arc<JobBoxes>,
    ) -> Self {
        LiveJob {
            job: Mutex::new(Some(boxes.boxed(job))),
            queue,
            conn,
            boxes,
        }
    }

    async fn id(&self) -> Result<String, Error> {
        Ok(self
            .engine_job(&mut *self.job.lock().await)?
            .id()
            .to_owned())
    }

    /// The engine job in its box (always there while the `LiveJob` lives).
    fn engine_job<'a>(&self, slot: &'a mut Option<JobBox>) -> Result<&'a mut bullmq::Job, Error> {
        slot.as_mut()
            .and_then(|boxed| boxed.as_mut().as_mut())
            .ok_or_else(|| Error::Worker {
                queue: self.queue.to_string(),
                reason: "a running job's engine job is gone".to_owned(),
            })
    }
}

impl Drop for LiveJob {
    fn drop(&mut self) {
        if let Some(boxed) = self.job.get_mut().take() {
            self.boxes.give_back(boxed);
        }
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
            let mut slot = self.job.lock().await;
            self.engine_job(&mut slot)?
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
            let id = self.id().await?;
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
                .remove_unprocessed_children(&self.id().await?)
                .await
                .map_err(engine_error)
        })
    }

    fn log<'a>(&'a self, line: &'a str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let mut slot = self.job.lock().await;
            self.engine_job(&mut slot)?
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
