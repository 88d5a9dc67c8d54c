//! What a job's page shows: the job, its state and a delayed job's next run in one
//! transaction, its logs, and its flow (bounded).

use queue_core::queue::JobLogs;
use queue_core::{JobInfo, JobState, QueueApp};

use super::flow::FlowTree;
use crate::limits::LOG_LINES;

/// A job's page data.
pub(crate) struct JobPage {
    pub(crate) info: JobInfo,
    pub(crate) state: JobState,
    pub(crate) logs: JobLogs,
    /// `None` when the job has no parent and no children.
    pub(crate) flow: Option<FlowTree>,
}

/// Reads job `id` of `queue` (named `name`); `None` when there is no such job.
pub(crate) async fn read(
    app: &QueueApp,
    queue: &queue_core::Queue<serde_json::Value>,
    name: &str,
    id: &str,
) -> Result<Option<JobPage>, queue_core::Error> {
    let (read, logs) = tokio::try_join!(queue.get_job(id), queue.get_job_logs(id, 0..LOG_LINES))?;
    let Some((info, Some(state))) = read.map(|info| {
        let state = info.state;
        (info, state)
    }) else {
        return Ok(None);
    };
    let flow = FlowTree::read(app, name, &info, state).await?;
    Ok(Some(JobPage {
        info,
        state,
        logs,
        flow,
    }))
}
