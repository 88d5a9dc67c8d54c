//! Adding a flow through the engine's flow producer: our checked jobs as its
//! `FlowJob` tree, each child's failure policy as BullMQ's option for it.

use super::connection::Connection;
use super::convert::{engine_error, options_to_engine};
use super::flow_gate::CONTINUES_PAST_FAILURES;
use crate::clock::now_ms;
use crate::error::Error;
use crate::flow::{AddedIds, OnChildFailure, PreparedJob};

/// Adds `root` and its descendants in one atomic pipeline (MULTI/EXEC).
pub(crate) async fn add_flow(conn: &Connection, root: &PreparedJob) -> Result<AddedIds, Error> {
    let timestamp = now_ms();
    let producer = conn.flow_producer()?;
    let node = Box::pin(producer.add(to_engine(root, timestamp)))
        .await
        .map_err(engine_error)?;
    Ok(ids(&node))
}

fn to_engine(job: &PreparedJob, timestamp: u64) -> bullmq::FlowJob {
    let mut opts = options_to_engine(&job.options, timestamp);
    match job.on_failure {
        None => {}
        Some(OnChildFailure::FailParent) => opts.fail_parent_on_failure = Some(true),
        Some(OnChildFailure::ContinueParent) => opts.continue_parent_on_failure = Some(true),
        Some(OnChildFailure::IgnoreDependency) => opts.ignore_dependency_on_failure = Some(true),
        Some(OnChildFailure::RemoveDependency) => opts.remove_dependency_on_failure = Some(true),
    }
    // A child's failure may release this parent while its other children run: the
    // worker that takes it checks them first, whatever its handler (`flow_gate`).
    if job
        .children
        .iter()
        .any(|c| c.on_failure == Some(OnChildFailure::ContinueParent))
    {
        opts.extensions
            .insert(CONTINUES_PAST_FAILURES.to_owned(), true.into());
    }
    bullmq::FlowJob {
        name: job.name.clone(),
        queue_name: job.queue.clone(),
        data: job.data.clone(),
        opts: Some(opts),
        prefix: None,
        children: (!job.children.is_empty()).then(|| {
            job.children
                .iter()
                .map(|c| to_engine(c, timestamp))
                .collect()
        }),
    }
}

fn ids(node: &bullmq::JobNode) -> AddedIds {
    AddedIds {
        id: node.job.id().to_owned(),
        children: node.children.iter().flatten().map(ids).collect(),
    }
}
