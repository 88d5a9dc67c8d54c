//! What we attach to a job besides BullMQ's own fields: the per-job timeout and the
//! trace id.
//!
//! They live in a key of their own, `<prefix>:<queue>:<id>:x`, written *before* the add:
//! written after, a fast worker could start the job first and run it without them.
//! (The job's own hash cannot be written first: the add script would take the job for
//! a duplicate.) The key expires on its own a month after the job is due, and the worker
//! deletes it when the job completes. Node workers simply do not see it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::connection::Connection;
use super::convert::millis;
use crate::error::Error;
use crate::options::JobOptions;

/// How long extras outlive the moment their job is due, at most.
const KEEP_AFTER_DUE: Duration = Duration::from_secs(30 * 24 * 3600);

/// What a worker learns from the extras.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobExtras {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) timeout_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) trace_id: Option<String>,
}

impl JobExtras {
    /// The extras `opts` asks for, if any.
    pub(crate) fn of(opts: &JobOptions) -> Option<Self> {
        let extras = JobExtras {
            timeout_ms: opts.timeout.map(millis),
            trace_id: opts.trace_id.as_deref().and_then(crate::trace::sanitize),
        };
        (extras != JobExtras::default()).then_some(extras)
    }

    pub(crate) fn timeout(&self) -> Option<Duration> {
        self.timeout_ms.map(Duration::from_millis)
    }
}

/// The extras key of a job.
pub(super) fn key(conn: &Connection, queue: &str, id: &str) -> String {
    format!("{}:{id}:x", conn.queue_base(queue))
}

/// Stores the extras of a job about to be added.
pub(super) async fn write(
    conn: &Connection,
    key: &str,
    extras: &JobExtras,
    opts: &JobOptions,
) -> Result<(), Error> {
    let json = serde_json::to_string(extras).map_err(|source| Error::Serialize {
        what: "job extras",
        source,
    })?;
    let keep = opts
        .delay
        .unwrap_or_default()
        .saturating_add(KEEP_AFTER_DUE);
    conn.query::<()>(
        redis::cmd("SET")
            .arg(key)
            .arg(json)
            .arg("EX")
            .arg(keep.as_secs()),
    )
    .await
}

/// Reads the extras of a job: `None` when it has none; empty when they cannot be
/// read (the attempt still runs).
pub(super) async fn read(conn: &Connection, key: &str) -> Option<JobExtras> {
    let read: Result<Option<String>, Error> = conn.query(redis::cmd("GET").arg(key)).await;
    match read {
        Ok(Some(json)) => Some(serde_json::from_str(&json).unwrap_or_else(|e| {
            tracing::warn!(key, error = %e, "unreadable job extras; running without");
            JobExtras::default()
        })),
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(key, error = %e, "cannot read the job's timeout and trace id; running without");
            Some(JobExtras::default())
        }
    }
}

/// Drops the extras of a completed job (kept after a failure, for a manual retry).
pub(super) async fn forget(conn: &Connection, key: &str) {
    if let Err(e) = conn.query::<()>(redis::cmd("DEL").arg(key)).await {
        tracing::debug!(key, error = %e, "cannot delete job extras; they expire on their own");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_options_with_extras_make_extras() {
        assert_eq!(JobExtras::of(&JobOptions::new().attempts(3)), None);
        let extras = JobExtras::of(
            &JobOptions::new()
                .timeout(Duration::from_secs(2))
                .trace_id("t-1"),
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&extras).unwrap(),
            r#"{"timeoutMs":2000,"traceId":"t-1"}"#
        );
        assert_eq!(extras.timeout(), Some(Duration::from_secs(2)));
    }
}
