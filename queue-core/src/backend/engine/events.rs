//! The engine's `QueueEvents` (a reader of the Redis event stream), typed as ours.

use bullmq::{QueueEvent as E, QueueEventsOptions};
use futures::future::BoxFuture;

use super::connection::Connection;
use super::convert::engine_error;
use crate::error::Error;
use crate::events::{EventFeed, QueueEvent};

pub(crate) struct EngineQueueEvents(bullmq::QueueEvents);

impl std::fmt::Debug for EngineQueueEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineQueueEvents")
            .field("queue", &self.0.name())
            .finish()
    }
}

impl EngineQueueEvents {
    /// Starts reading after the stream's current last entry, so that nothing written
    /// after `open` returns is missed (reading from `$` would race the reader task).
    pub(crate) async fn open(conn: &Connection, queue: &str) -> Result<Self, Error> {
        let connection = conn.worker_options().connection;
        let last_id = last_entry_id(conn, queue).await?;
        let mut options = QueueEventsOptions {
            prefix: conn.prefix().to_owned(),
            last_event_id: Some(last_id),
            blocking_timeout: 1000,
            ..Default::default()
        };
        options.connection = connection;
        let inner = bullmq::QueueEvents::with_options(queue, options)
            .await
            .map_err(engine_error)?;
        Ok(EngineQueueEvents(inner))
    }
}

impl EventFeed for EngineQueueEvents {
    fn next(&self) -> BoxFuture<'_, Option<QueueEvent>> {
        // `&self`: the engine's reader is shared by whoever awaits it.
        Box::pin(async move { self.0.next_event().await.map(|entry| convert(entry.event)) })
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.0.close().await })
    }
}

/// The id of the stream's last entry (`0` for an empty stream), so that reading starts
/// right after it. A transient error is retried; one that persists fails the open:
/// starting from `0` instead would replay the whole stream to every listener.
async fn last_entry_id(conn: &Connection, queue: &str) -> Result<String, Error> {
    let stream = format!("{}:events", conn.queue_base(queue));
    let mut tries = 0;
    loop {
        let mut cmd = redis::cmd("XREVRANGE");
        cmd.arg(&stream).arg("+").arg("-").arg("COUNT").arg(1);
        let query = conn.query::<Vec<(String, Vec<(String, String)>)>>(&mut cmd);
        let after = std::time::Duration::from_secs(3);
        let read = tokio::time::timeout(after, query)
            .await
            .unwrap_or(Err(Error::Timeout {
                what: "queue_events",
                after,
            }));
        match read {
            Ok(last) => {
                return Ok(last
                    .into_iter()
                    .next()
                    .map_or_else(|| "0".to_owned(), |(id, _)| id))
            }
            Err(e) if tries < 3 => {
                tries += 1;
                tracing::debug!(%queue, error = %e, "cannot read the event stream's last id; trying again");
                tokio::time::sleep(std::time::Duration::from_millis(100 * tries)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

fn convert(event: E) -> QueueEvent {
    match event {
        E::Added { job_id, name } => QueueEvent::Added { job_id, name },
        E::Waiting { job_id, .. } => QueueEvent::Waiting { job_id },
        E::Delayed { job_id, delay } => QueueEvent::Delayed {
            job_id,
            until_ms: delay,
        },
        E::Active { job_id, .. } => QueueEvent::Active { job_id },
        E::Progress { job_id, data } => QueueEvent::Progress { job_id, data },
        E::Completed {
            job_id,
            return_value,
            ..
        } => QueueEvent::Completed {
            job_id,
            return_value: serde_json::from_str(&return_value)
                .unwrap_or(serde_json::Value::String(return_value)),
        },
        E::Failed {
            job_id,
            failed_reason,
            ..
        } => QueueEvent::Failed {
            job_id,
            reason: failed_reason,
        },
        E::Stalled { job_id } => QueueEvent::Stalled { job_id },
        E::Removed { job_id, .. } => QueueEvent::Removed { job_id },
        E::Duplicated { job_id } => QueueEvent::Duplicated { job_id },
        E::Deduplicated {
            job_id,
            deduplication_id,
            ..
        } => QueueEvent::Deduplicated {
            job_id,
            deduplication_id,
        },
        E::RetriesExhausted { job_id, .. } => QueueEvent::RetriesExhausted { job_id },
        E::Drained => QueueEvent::Drained,
        E::Paused => QueueEvent::Paused,
        E::Resumed => QueueEvent::Resumed,
        other => QueueEvent::Other {
            name: other.name().to_owned(),
        },
    }
}
