//! The audit log: one event per action on [`AUDIT_TARGET`], with who did what to which
//! queue and job or group, and how it went; and one per sealed value a page opened.

use queue_axum::access::Access;

/// The tracing target of the audit log: one event per action, with who, what, which
/// queue and job, and the outcome; and one per sealed payload or return value a page
/// opened for a reader the policy lets reveal them
/// ([`Access::with_reveal`](queue_axum::access::Access::with_reveal)), with who, which
/// queue, job, field and key, and whether it opened (never the value). The fields:
/// `data`, `returnvalue`, and for a queue that seals them too `failedReason`,
/// `stacktrace` (one attempt's record) and `log` (one log line), one event per text.
pub const AUDIT_TARGET: &str = "queue_dashboard::audit";

/// What an action touched within its queue, for the audit line.
pub(crate) enum Subject<'a> {
    /// The whole queue.
    Queue,
    /// One job (or scheduler), by id.
    Job(&'a str),
    /// One group, by id.
    Group(&'a str),
}

/// One line per action: who did what to which queue and job or group, and how it went.
pub(crate) fn audit(
    access: &Access,
    action: &str,
    queue: &str,
    subject: Subject<'_>,
    outcome: &Result<(), queue_core::Error>,
) {
    let (job_id, group) = match subject {
        Subject::Queue => (None, None),
        Subject::Job(id) => (Some(id), None),
        Subject::Group(id) => (None, Some(id)),
    };
    match outcome {
        Ok(()) => tracing::info!(
            target: AUDIT_TARGET,
            who = access.who(),
            action,
            queue,
            job_id,
            group,
            "dashboard action"
        ),
        Err(error) => tracing::warn!(
            target: AUDIT_TARGET,
            who = access.who(),
            action,
            queue,
            job_id,
            group,
            %error,
            "dashboard action failed"
        ),
    }
}

/// A job added from the form (a duplicate id adds nothing, and says so).
pub(crate) fn added(access: &Access, queue: &str, job_id: &str, duplicate: bool) {
    tracing::info!(
        target: AUDIT_TARGET,
        who = access.who(),
        action = "add",
        queue = %queue,
        job_id = %job_id,
        duplicate,
        "dashboard action"
    );
}

/// A refused action (the policy's, or another site's), at `warn`.
pub(crate) fn refused(access: &Access, method: &str, path: &str, status: u16) {
    tracing::warn!(
        target: AUDIT_TARGET,
        who = access.who(),
        method = %method,
        path = %path,
        status,
        "dashboard action refused"
    );
}

/// A sealed `field` (`data`, `returnvalue`, `failedReason`, `stacktrace` or `log`) of
/// job `job_id` opened for `access` to read: who, which queue, job and key, and whether it opened. The value never: the log
/// is read by more people than the value is for. A failed opening is logged too (at
/// `warn`, with the reason): an attempt to read is what the audit is for.
pub(crate) fn revealed(
    access: &Access,
    queue: &str,
    job_id: &str,
    field: &str,
    key: &str,
    outcome: Result<(), &queue_core::Error>,
) {
    match outcome {
        Ok(()) => tracing::info!(
            target: AUDIT_TARGET,
            who = access.who(),
            action = "reveal",
            queue,
            job_id,
            field,
            key,
            "sealed value opened"
        ),
        Err(error) => tracing::warn!(
            target: AUDIT_TARGET,
            who = access.who(),
            action = "reveal",
            queue,
            job_id,
            field,
            key,
            %error,
            "sealed value did not open"
        ),
    }
}
