//! Fields we add to a job's hash besides BullMQ's own: the per-job timeout and the trace
//! id. BullMQ ignores fields it does not know and deletes them with the job; Node
//! workers simply do not see them.

use std::time::Duration;

use super::connection::Connection;
use crate::error::Error;
use crate::options::JobOptions;

const TIMEOUT_FIELD: &str = "x-timeout-ms";
const TRACE_FIELD: &str = "x-trace-id";

/// What a worker learns from the extra fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct JobExtras {
    pub(crate) timeout: Option<Duration>,
    pub(crate) trace_id: Option<String>,
}

/// Writes the extras `opts` asks for (nothing, and no round trip, when none).
pub(super) async fn write(
    conn: &Connection,
    job_key: &str,
    opts: &JobOptions,
) -> Result<(), Error> {
    let mut cmd = redis::cmd("HSET");
    cmd.arg(job_key);
    let mut any = false;
    if let Some(timeout) = opts.timeout {
        cmd.arg(TIMEOUT_FIELD)
            .arg(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
        any = true;
    }
    if let Some(trace_id) = opts.trace_id.as_deref().and_then(crate::trace::sanitize) {
        cmd.arg(TRACE_FIELD).arg(trace_id);
        any = true;
    }
    if any {
        conn.query::<()>(&mut cmd).await?;
    }
    Ok(())
}

/// Reads the extras of a job; a failed read means none (the attempt still runs).
pub(super) async fn read(conn: &Connection, job_key: &str) -> JobExtras {
    let read: Result<(Option<u64>, Option<String>), Error> = conn
        .query(
            redis::cmd("HMGET")
                .arg(job_key)
                .arg(TIMEOUT_FIELD)
                .arg(TRACE_FIELD),
        )
        .await;
    match read {
        Ok((timeout, trace_id)) => JobExtras {
            timeout: timeout.map(Duration::from_millis),
            trace_id,
        },
        Err(e) => {
            tracing::warn!(job_key, error = %e, "cannot read the job's timeout and trace id; running without");
            JobExtras::default()
        }
    }
}
