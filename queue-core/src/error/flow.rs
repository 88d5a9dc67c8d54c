//! Why a flow was refused. Every refusal is made before anything is written.

/// Why [`QueueApp::add_flow`](crate::QueueApp::add_flow) wrote nothing.
///
/// A job of a flow whose id exists already is taken into the flow when it can still
/// end (its parent reads its result once it has), and answered as a `duplicate` in its
/// real state; otherwise the flow is refused with this error, and nothing of it is
/// written. The checks and the write are one optimistic transaction (`WATCH` on every
/// id the flow names, then `MULTI`/`EXEC`): a job that changes between them makes the
/// write start again from the checks, so no concurrent add can slip between them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlowError {
    /// A job below the root names a job id that exists, and that job cannot be this
    /// flow's.
    #[error("flow job {path} ({queue}/{id}): a job with this id exists and {reason}; nothing of the flow was added")]
    ExistingJob {
        /// The job's place in the tree (`root.1.0`).
        path: String,
        /// Its queue.
        queue: String,
        /// Its job id.
        id: String,
        /// Why the existing job cannot be taken in.
        reason: ExistingJobConflict,
    },
    /// Two jobs of the flow name the same job: a job id names one job.
    #[error("flow jobs {first} and {second} are both {queue}/{id}: a job id names one job; nothing of the flow was added")]
    RepeatedId {
        /// The first job's place in the tree.
        first: String,
        /// The second's.
        second: String,
        /// The queue.
        queue: String,
        /// The job id.
        id: String,
    },
    /// The jobs the flow names kept changing between the checks and the write (other
    /// clients writing them), `tries` times: nothing was written; try again.
    #[error("the jobs this flow names kept changing while it was added ({tries} tries); nothing of the flow was added, try again")]
    Contended {
        /// How many times the write was attempted.
        tries: u32,
    },
}

/// Why an existing job cannot be taken into a flow (see [`FlowError::ExistingJob`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExistingJobConflict {
    /// It failed: its new parent would wait for it for ever. Retry or remove it first,
    /// or give the flow's job another id.
    #[error("failed (its new parent would wait for it for ever: retry or remove it first, or choose another id)")]
    Failed,
    /// It is the child of another parent, which waits for it: a job has one parent.
    #[error("is a child of {parent} (a job has one parent)")]
    OtherParent {
        /// The parent, as `queue/id`.
        parent: String,
    },
    /// The flow gives it children: a job that exists does not wait for new ones.
    #[error("the flow gives it children (a job that exists does not wait for new ones)")]
    GivenChildren,
}
