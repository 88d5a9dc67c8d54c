//! What we attach to a job besides BullMQ's own fields: the per-job timeout and the
//! trace id.
//!
//! They live in a key of their own, `<prefix>:<queue>:<id>:x`. For a job with its own
//! id the key is written *before* the add: written after, a fast worker could start the
//! job first and run it without them. (The job's own hash cannot be written first: the
//! add script would take the job for a duplicate.) A job without an id gets a generated
//! one, and its key is written in the same instant as the add, saving a round trip; a
//! worker that does not find it yet waits up to about 85 ms for it. The key expires on
//! its own a month after the job is due, and the worker deletes it when the job
//! completes. Node workers simply do not see it.
//!
//! Reading the key costs a worker a round trip per attempt, which at concurrency 1
//! halves its throughput. So the job says whether it has extras, in the one field we
//! set that the engine carries to the worker untouched: the creation timestamp, odd
//! when it has extras and even when not (a shift of at most 1 ms). Jobs of other
//! producers never have extras: those with BullMQ's integer ids are never looked up,
//! and those with an id of their own and an odd timestamp cost a lookup that finds
//! nothing.

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

/// The creation timestamp of a job: odd when it has extras, even when not.
pub(super) fn stamp(now_ms: u64, has_extras: bool) -> u64 {
    if has_extras {
        now_ms | 1
    } else {
        now_ms & !1
    }
}

/// Whether job `id`, created at `timestamp_ms`, may have extras, which are then read.
/// An integer id is BullMQ's own counter: such a job was added by another producer
/// (ours give every job with extras an id), so it has none, whatever its timestamp.
pub(super) fn may_exist(id: &str, timestamp_ms: u64) -> bool {
    timestamp_ms & 1 == 1 && !id.bytes().all(|b| b.is_ascii_digit())
}

/// Ids we generate for jobs with extras and no id of their own: recognisable, so that a
/// worker knows their extras may trail the add by a moment.
const GENERATED_ID_PREFIX: &str = "j-";

/// A new id for a job with extras and no id of its own.
pub(super) fn generated_id() -> String {
    format!("{GENERATED_ID_PREFIX}{}", uuid::Uuid::new_v4().simple())
}

/// Whether the extras of job `id` are written alongside its add, so that a worker
/// fast enough may look before they land.
pub(super) fn may_trail(id: &str) -> bool {
    id.strip_prefix(GENERATED_ID_PREFIX)
        .is_some_and(|rest| rest.len() == 32 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The waits before looking again for extras that may trail their job's add: the
/// write left in the same instant as the add, so it is normally there at once.
const TRAILING_WAITS_MS: [u64; 4] = [1, 4, 16, 64];

/// Reads the extras of a job created at `timestamp_ms`, waiting briefly for extras
/// that may trail the add; `None` when the job has none.
pub(super) async fn read_for(
    conn: &Connection,
    queue: &str,
    id: &str,
    timestamp_ms: u64,
) -> Option<JobExtras> {
    if !may_exist(id, timestamp_ms) {
        return None;
    }
    let key = &key(conn, queue, id);
    let found = read(conn, key).await;
    if found.is_some() || !may_trail(id) {
        return found;
    }
    for wait in TRAILING_WAITS_MS {
        tokio::time::sleep(Duration::from_millis(wait)).await;
        if let Some(found) = read(conn, key).await {
            return Some(found);
        }
    }
    tracing::warn!(
        key,
        "the job's timeout and trace id never arrived; running without"
    );
    None
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
async fn read(conn: &Connection, key: &str) -> Option<JobExtras> {
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

/// Drops the extras of finished or removed jobs (they expire on their own otherwise).
pub(super) async fn forget(conn: &Connection, keys: &[String]) {
    if keys.is_empty() {
        return;
    }
    if let Err(e) = conn.query::<()>(redis::cmd("DEL").arg(keys)).await {
        tracing::debug!(keys = keys.len(), error = %e, "cannot delete job extras; they expire on their own");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timestamp_says_whether_a_job_has_extras() {
        for now in [1_700_000_000_000, 1_700_000_000_001] {
            assert!(may_exist("welcome-1", stamp(now, true)));
            assert!(!may_exist("welcome-1", stamp(now, false)));
            assert!(stamp(now, true).abs_diff(now) <= 1);
            assert!(stamp(now, false).abs_diff(now) <= 1);
        }
        // BullMQ's own integer ids are other producers' jobs, which have no extras.
        assert!(!may_exist("1234", 1_700_000_000_001));
    }

    #[test]
    fn generated_ids_are_told_apart_from_others() {
        let id = generated_id();
        assert!(may_trail(&id), "{id}");
        assert!(crate::job::id::validate_job_id(&id).is_ok());
        for other in ["welcome-42", "j-", "j-123", &id.to_uppercase(), &id[2..]] {
            assert!(!may_trail(other), "{other}");
        }
    }

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
