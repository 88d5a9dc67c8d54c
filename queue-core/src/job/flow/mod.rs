//! A job's place in a flow, as the engine writes it: what a child's failure does to its
//! parent, a flow checked and ready to write, the ids it was given, and the rules for a
//! job id that exists already ([`claims`]).

mod claims;

pub(crate) use claims::{claims, judge, Claim, Found};

use crate::job::JobState;
use crate::options::JobOptions;

/// What a child's final failure does to its parent. Every child of a flow states one:
/// BullMQ's default (none of these) leaves the parent waiting for that child forever,
/// so this API has no default.
///
/// A child counts as failed once its last attempt fails (or it fails unrecoverably,
/// cancelled included); earlier attempts that are retried change nothing. A child
/// *removed* while pending is dropped from its parent's dependencies whatever its
/// policy: the parent runs once its other children are done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OnChildFailure {
    /// The parent fails at once, without running, with the reason
    /// `child <prefix>:<queue>:<id> failed` (BullMQ's `failParentOnFailure`). A parent
    /// that is itself a child passes the failure up by its own policy.
    FailParent,
    /// The parent goes on without its other children: it finds the failure in
    /// [`ChildResults::failed`](crate::ChildResults::failed) (BullMQ's
    /// `continueParentOnFailure`).
    ///
    /// BullMQ releases the parent the moment the child fails, other children pending or
    /// not. Its handler never runs alongside a child it waits for: the worker that takes
    /// it first removes the children that have not started (the parent does not wait
    /// for them), and if one is still running (or has a running descendant), moves the
    /// parent back to `waiting-children` without running it and without spending an
    /// attempt. It then runs once, when the last of them ends (completed: its value is
    /// in `ChildResults`; failed: as that child's own policy says), or is cancelled.
    /// This holds whatever the parent's handler, for a flow added here; for one Node's
    /// `FlowProducer` added, when the handler takes `ChildResults`.
    ContinueParent,
    /// The parent runs when its other children are done, and finds the failure in
    /// [`ChildResults::failed`](crate::ChildResults::failed) (BullMQ's
    /// `ignoreDependencyOnFailure`).
    IgnoreDependency,
    /// The parent runs when its other children are done, as if this child had never
    /// been part of the flow: no trace of it in [`ChildResults`](crate::ChildResults)
    /// (BullMQ's `removeDependencyOnFailure`).
    RemoveDependency,
}

/// A flow job checked and ready for the engine.
#[derive(Debug)]
pub(crate) struct PreparedJob {
    pub(crate) queue: String,
    pub(crate) name: String,
    pub(crate) data: serde_json::Value,
    pub(crate) options: JobOptions,
    /// `None` for the root.
    pub(crate) on_failure: Option<OnChildFailure>,
    pub(crate) children: Vec<PreparedJob>,
}

impl PreparedJob {
    /// The queue of this job and of each descendant, depth first.
    pub(crate) fn queues(&self) -> Vec<&str> {
        let mut all = vec![self.queue.as_str()];
        for child in &self.children {
            all.extend(child.queues());
        }
        all
    }
}

/// The ids the engine gave a flow's jobs, in the flow's shape.
#[derive(Debug)]
pub(crate) struct AddedIds {
    pub(crate) id: String,
    /// The state of the job found under this id, which the flow took in; `None` for
    /// a job the flow added.
    pub(crate) existing: Option<JobState>,
    pub(crate) children: Vec<AddedIds>,
}

/// What writing a flow did.
#[derive(Debug)]
pub(crate) enum FlowWrite {
    /// The root's job id exists: nothing was written.
    RootExists,
    /// The flow was written.
    Added(AddedIds),
}
