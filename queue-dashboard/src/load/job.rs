//! What a job's page shows: the job, its state and a delayed job's next run in one
//! transaction, its logs, its flow (bounded), and its payload, return value, failure
//! reasons and log lines as the reader may see them (sealed ones opened only for a
//! reader who may reveal them).

use queue_axum::access::Access;
use queue_core::{JobInfo, JobState, QueueApp};

use super::flow::FlowTree;
use super::notes::Notes;
use super::payload::Values;
use crate::limits::LOG_LINES;

/// A job's page data.
pub(crate) struct JobPage {
    /// The job, without its payload and return value (in `values`), failure reason
    /// and attempt records (in `notes`).
    pub(crate) info: JobInfo,
    /// Its payload and return value, opened if sealed and `access` reveals them.
    pub(crate) values: Values,
    /// Its failure reason, attempt records and log lines, opened as `values` are.
    pub(crate) notes: Notes,
    pub(crate) state: JobState,
    /// `None` when the job has no parent and no children.
    pub(crate) flow: Option<FlowTree>,
}

/// Reads job `id` of `queue` (named `name`) for `access`; `None` when there is no such
/// job.
pub(crate) async fn read(
    app: &QueueApp,
    access: &Access,
    queue: &queue_core::Queue<serde_json::Value>,
    name: &str,
    id: &str,
) -> Result<Option<JobPage>, queue_core::Error> {
    let (read, logs) = tokio::try_join!(queue.get_job(id), queue.get_job_logs(id, 0..LOG_LINES))?;
    let Some((mut info, Some(state))) = read.map(|info| {
        let state = info.state;
        (info, state)
    }) else {
        return Ok(None);
    };
    let mut flow = FlowTree::read(app, access, name, &info, state).await?;
    let values = Values::take(queue, access, &mut info);
    // The reason is shown where no attempt's record is kept (each record starts with
    // its attempt's reason), and beside the job in its flow when it failed: read (and
    // opened) once for both.
    let shows_reason =
        info.stacktrace.is_empty() || flow.as_ref().is_some_and(FlowTree::shows_current_reason);
    let notes = Notes::take(queue, access, &mut info, logs, shows_reason);
    if let Some(flow) = &mut flow {
        flow.set_current_reason(notes.failed_reason.clone());
    }
    Ok(Some(JobPage {
        info,
        values,
        notes,
        state,
        flow,
    }))
}
