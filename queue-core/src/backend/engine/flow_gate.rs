//! A flow parent taken while children it waits for still run goes back to waiting for
//! them, without running and without spending an attempt.
//!
//! BullMQ's `continueParentOnFailure` moves the parent to `wait` the moment such a
//! child fails, siblings pending or not. Run then, the parent's handler would overlap
//! a sibling still running, and its completion would be refused ("pending
//! dependencies") and retried until its attempts ran out: the handler's effects once
//! per attempt, and a parent failed with no result. So before such a parent runs, the
//! worker drops the children that have not started (the policy's promise: the parent
//! does not wait for them) and, if any dependency is left (one that runs, or has a
//! running descendant), moves the parent back to `waiting-children` with BullMQ's
//! `moveToWaitingChildren`. The last of them to end releases it, and it runs once.

use super::connection::Connection;
use super::convert::engine_error;
use super::queue::EngineQueue;
use crate::error::Error;
use crate::job::ChildKey;

/// The option key, in a flow parent's stored options, that says the parent has a
/// child whose failure lets it run early (`OnChildFailure::ContinueParent`): the worker
/// checks its children before running it, whatever its handler. (A handler that reads
/// `ChildResults` has them checked anyway, for flows that other producers added.)
pub(crate) const CONTINUES_PAST_FAILURES: &str = "continuesPastFailedChildren";

/// What the worker does with a parent it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ParentGate {
    /// Nothing it waits for is left: run it.
    Run,
    /// Moved back to `waiting-children`: the engine must leave it there.
    BackToWaitingChildren,
    /// A child whose failure fails it has failed meanwhile: fail it, without retries.
    Fail(String),
}

/// Checks the parent `job` of `queue`, taken by this worker (it holds its lock), as
/// the module says. One round trip when nothing is pending, the common case.
pub(super) async fn check_parent(
    conn: &Connection,
    queue: &str,
    job: &bullmq::Job,
) -> Result<ParentGate, Error> {
    let key = format!("{}:{}", conn.queue_base(queue), job.id());
    let mut pipe = redis::pipe();
    pipe.cmd("SMEMBERS").arg(format!("{key}:dependencies"));
    pipe.cmd("HLEN").arg(format!("{key}:failed"));
    let (pending, failed_children): (Vec<String>, u64) = conn.pipeline(&pipe).await?;
    if pending.is_empty() {
        return Ok(ParentGate::Run);
    }
    // Released early past a failed child: the children not started are dropped (a
    // locked one, or one with a locked descendant, is refused by the removal and
    // waited for). Pending children without a failed one (a parent moved to `wait` by
    // hand) are all waited for.
    if failed_children > 0 {
        for child in &pending {
            let child = ChildKey::from_redis_key(child);
            let removed = EngineQueue::open(conn, &child.queue)
                .await?
                .remove(&child.id)
                .await?;
            if removed {
                tracing::info!(queue, job_id = job.id(), child = %child, "a child not started is dropped: its parent continues past a failed child");
            }
        }
    }
    // `moveToActive` counted an attempt as started; none was. Given back before the
    // move, so that a worker taking the parent later never sees one more start than
    // runs (and reads a stall that never was).
    let ats = |by: i64| {
        redis::cmd("HINCRBY")
            .arg(&key)
            .arg("ats")
            .arg(by)
            .to_owned()
    };
    conn.query::<i64>(&mut ats(-1)).await?;
    // Atomic: moved only if a dependency is still pending.
    match job.move_to_waiting_children(None).await {
        Ok(true) => {
            tracing::info!(
                queue,
                job_id = job.id(),
                "the parent waits for its running children before it runs"
            );
            Ok(ParentGate::BackToWaitingChildren)
        }
        Ok(false) => {
            conn.query::<i64>(&mut ats(1)).await?;
            Ok(ParentGate::Run)
        }
        Err(e) => {
            if let Err(undo) = conn.query::<i64>(&mut ats(1)).await {
                tracing::warn!(queue, job_id = job.id(), error = %undo, "could not restore the parent's count of started attempts");
            }
            match e {
                // A `FailParent` child failed since the parent was taken (BullMQ also
                // set its deferred failure): no retry can change that.
                bullmq::Error::Unrecoverable(reason) => Ok(ParentGate::Fail(reason)),
                other => Err(engine_error(other)),
            }
        }
    }
}
