//! A job's place in its flow, as the status route shows it: its parent, and its
//! children by outcome. Return values and failure reasons follow the route's opt-ins.

use queue_core::{queue::Children, JobInfo};
use serde::Serialize;

use super::settings::JobRoutes;

/// How many children of each kind the route lists (totals are always given).
pub(super) const CHILDREN_SHOWN: usize = 20;

/// A job named by queue and id.
#[derive(Debug, Serialize)]
pub(super) struct JobRef {
    queue: String,
    id: String,
}

/// A flow parent's children.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ChildrenStatus {
    pending: Vec<JobRef>,
    pending_total: u64,
    processed: Vec<ProcessedChild>,
    processed_total: u64,
    failed: Vec<FailedChild>,
    failed_total: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ProcessedChild {
    #[serde(flatten)]
    job: JobRef,
    #[serde(skip_serializing_if = "Option::is_none")]
    return_value: Option<Option<serde_json::Value>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct FailedChild {
    #[serde(flatten)]
    job: JobRef,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed_reason: Option<String>,
}

/// The parent, when `info` is a flow child whose parent's queue the route serves.
pub(super) fn parent(info: &JobInfo, serves: impl Fn(&str) -> bool) -> Option<JobRef> {
    let parent = info.parent.as_ref()?;
    serves(parent.queue()).then(|| JobRef {
        queue: parent.queue().to_owned(),
        id: parent.id.clone(),
    })
}

/// The children, when there are any.
pub(super) fn children(children: Children, settings: &JobRoutes) -> Option<ChildrenStatus> {
    if children.is_empty() {
        return None;
    }
    let job = |queue: String, id: String| JobRef { queue, id };
    Some(ChildrenStatus {
        pending: children
            .pending
            .into_iter()
            .map(|c| job(c.queue, c.id))
            .collect(),
        pending_total: children.pending_total,
        processed: children
            .processed
            .into_iter()
            .map(|c| ProcessedChild {
                return_value: settings.include_return_value.then_some(c.return_value),
                job: job(c.queue, c.id),
            })
            .collect(),
        processed_total: children.processed_total,
        failed: children
            .failed
            .into_iter()
            .map(|f| FailedChild {
                failed_reason: settings.include_failed_reason.then_some(f.reason),
                job: job(f.child.queue, f.child.id),
            })
            .collect(),
        failed_total: children.failed_total,
    })
}
