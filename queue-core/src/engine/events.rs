//! The engine's `QueueEvents` (a reader of the Redis event stream), typed as ours.

use bullmq::{QueueEvent as E, QueueEventsOptions};

use super::connection::Connection;
use super::convert::engine_error;
use crate::error::Error;
use crate::events::QueueEvent;

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
        let stream = format!("{}:events", conn.queue_base(queue));
        let last: Vec<(String, Vec<(String, String)>)> = conn
            .query(
                redis::cmd("XREVRANGE")
                    .arg(&stream)
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(1),
            )
            .await
            .unwrap_or_default();
        let last_id = last
            .into_iter()
            .next()
            .map_or_else(|| "0".to_owned(), |(id, _)| id);
        let mut options = QueueEventsOptions {
            prefix: conn.prefix().to_owned(),
            last_event_id: Some(last_id),
            blocking_timeout: 1000,
            ..Default::default()
        };
        options.connection = conn.worker_options().connection;
        let inner = bullmq::QueueEvents::with_options(queue, options)
            .await
            .map_err(engine_error)?;
        Ok(EngineQueueEvents(inner))
    }

    pub(crate) async fn next(&self) -> Option<QueueEvent> {
        self.0.next_event().await.map(|entry| convert(entry.event))
    }

    pub(crate) async fn close(self) {
        self.0.close().await;
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
