//! What a job's page shows: the job, its state and a delayed job's next run in one
//! transaction, its logs, its flow (bounded), and its payload and return value as the
//! reader may see them (sealed ones opened only for a reader who may reveal them).

use queue_axum::access::Access;
use queue_core::queue::JobLogs;
use queue_core::{JobInfo, JobState, QueueApp};

use super::flow::FlowTree;
use super::payload::Values;
use crate::limits::LOG_LINES;

/// A job's page data.
pub(crate) struct JobPage {
    /// The job, without its payload and return value (in `values`).
    pub(crate) info: JobInfo,
    /// Its payload and return value, opened if sealed and `access` reveals them.
    pub(crate) values: Values,
    pub(crate) state: JobState,
    pub(crate) logs: JobLogs,
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
    let flow = FlowTree::read(app, name, &info, state).await?;
    let values = Values::take(queue, access, &mut info);
    Ok(Some(JobPage {
        info,
        values,
        state,
        logs,
        flow,
    }))
}
