//! The audit log: one event per action on [`AUDIT_TARGET`], with who did what to which
//! queue and job or group, and how it went.

use queue_axum::access::Access;

/// The tracing target of the audit log: one event per action, with who, what, which
/// queue and job, and the outcome.
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
