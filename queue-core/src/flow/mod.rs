//! Flows: a parent job and its children, across queues, added atomically; the parent
//! runs once its children are done and reads their results as typed values
//! ([`ChildResults`](crate::ChildResults)).

mod claims;
mod error;

use serde::Serialize;
use tracing::Instrument;

pub(crate) use claims::{judge, Claim, Found};
pub use error::{ExistingJob, FlowError};

use crate::error::Error;
use crate::job::JobState;
use crate::options::JobOptions;
use crate::queue::{AddedJob, Queue};
use crate::watch::JobLink;

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

/// One job of a flow, with its children (which may have children of their own).
/// Made by [`Queue::flow_job`], so the payload type is the queue's; added with
/// [`QueueApp::add_flow`](crate::QueueApp::add_flow).
///
/// ```no_run
/// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
/// use queue_core::{JobOptions, OnChildFailure};
///
/// #[derive(serde::Serialize)]
/// struct Month { year: i32, month: u32 }
///
/// let reports = app.queue::<Month>("reports")?;
/// let steps = app.queue::<Month>("report-steps")?;
/// let month = || Month { year: 2026, month: 11 };
/// let flow = reports
///     .flow_job("notify", month())
///     .options(JobOptions::new().job_id("report-2026-11"))
///     .child(
///         OnChildFailure::FailParent,
///         steps.flow_job("render", month()).child(
///             OnChildFailure::FailParent,
///             steps.flow_job("aggregate", month()),
///         ),
///     );
/// let added = app.add_flow(flow).await?;
/// assert_eq!(added.job.id, "report-2026-11");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a flow job does nothing until it is added with `QueueApp::add_flow`"]
pub struct FlowJob {
    queue: Queue<serde_json::Value>,
    name: String,
    /// The payload as JSON, or why it could not be made (reported by `add_flow`).
    data: Result<serde_json::Value, String>,
    options: JobOptions,
    children: Vec<(OnChildFailure, FlowJob)>,
}

impl<T: Serialize> Queue<T> {
    /// A job of this queue, named `name`, for a flow. Nothing is written until the
    /// flow's root is added with [`QueueApp::add_flow`](crate::QueueApp::add_flow).
    pub fn flow_job(&self, name: &str, data: T) -> FlowJob {
        FlowJob {
            queue: self.retyped(),
            name: name.to_owned(),
            data: serde_json::to_value(&data).map_err(|e| e.to_string()),
            options: JobOptions::default(),
            children: Vec::new(),
        }
    }
}

impl FlowJob {
    /// Sets this job's options (the queue's and the app's defaults fill what is unset,
    /// as for `add`). A deduplication is refused: the root's job id makes a flow
    /// idempotent.
    pub fn options(mut self, options: JobOptions) -> Self {
        self.options = options;
        self
    }

    /// Adds a child: this job waits for it, and `on_failure` says what the child's
    /// final failure does to this job.
    pub fn child(mut self, on_failure: OnChildFailure, child: FlowJob) -> Self {
        self.children.push((on_failure, child));
        self
    }

    /// The job's queue.
    pub fn queue(&self) -> &str {
        self.queue.name()
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every check `add` makes, for this job and its descendants; `path` names the job
    /// in errors (`root`, `root.1`, `root.1.0`...).
    fn prepare(self, path: &str, on_failure: Option<OnChildFailure>) -> Result<PreparedJob, Error> {
        let named = format!("flow job {path} ({}.{})", self.queue(), self.name);
        let at = |e: Error| match e {
            Error::InvalidOption { option, reason } => Error::InvalidOption {
                option,
                reason: format!("{named}: {reason}"),
            },
            other => other,
        };
        let data = self.data.map_err(|reason| {
            at(Error::invalid(
                "data",
                format!("cannot be serialized: {reason}"),
            ))
        })?;
        // A deduplicated flow job is skipped by BullMQ with its descendants, and which
        // job it matched cannot be told from the answer: a flow is made idempotent by
        // its root's job id instead.
        if self.options.deduplication.is_some() {
            return Err(at(Error::invalid(
                "deduplication",
                "a flow's jobs cannot be deduplicated; give the root a job_id: a flow whose root id exists is not added again",
            )));
        }
        let options = self.queue.prepare(self.options).map_err(at)?;
        self.queue.check_size(&data).map_err(at)?;
        let children = self
            .children
            .into_iter()
            .enumerate()
            .map(|(i, (policy, child))| child.prepare(&format!("{path}.{i}"), Some(policy)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PreparedJob {
            queue: self.queue.name().to_owned(),
            name: self.name,
            data,
            options,
            on_failure,
            children,
        })
    }
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
    fn queues(&self) -> Vec<&str> {
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

/// What [`QueueApp::add_flow`](crate::QueueApp::add_flow) added: each job with its
/// children, in the order they were given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AddedFlow {
    /// This job (a parent starts in `waiting-children`).
    pub job: AddedJob,
    /// Its children.
    pub children: Vec<AddedFlow>,
}

impl AddedFlow {
    /// Every job of the flow, this one first, depth first.
    pub fn jobs(&self) -> Vec<&AddedJob> {
        let mut all = vec![&self.job];
        for child in &self.children {
            all.extend(child.jobs());
        }
        all
    }

    fn new<T>(queue: &Queue<T>, prepared: &PreparedJob, ids: AddedIds) -> Self {
        let state = if prepared.children.is_empty() {
            prepared.options.initial_state()
        } else {
            JobState::WaitingChildren
        };
        AddedFlow {
            job: AddedJob {
                queue: prepared.queue.clone(),
                id: ids.id,
                name: prepared.name.clone(),
                duplicate: ids.existing.is_some(),
                state: Some(ids.existing.unwrap_or(state)),
                link: if prepared.queue == queue.name() {
                    JobLink::to(queue)
                } else {
                    JobLink::to(&queue.sibling(&prepared.queue))
                },
            },
            children: prepared
                .children
                .iter()
                .zip(ids.children)
                .map(|(child, ids)| AddedFlow::new(queue, child, ids))
                .collect(),
        }
    }
}

/// Adds `root` and its descendants atomically. A root whose `job_id` exists already adds
/// nothing: the answer is that job, `duplicate`, without children. A child whose id
/// exists is taken in (answered `duplicate`, in its state) when it can still end for its
/// new parent; otherwise nothing is written ([`FlowError`]).
pub(crate) async fn add(root: FlowJob) -> Result<AddedFlow, Error> {
    let queue = root.queue.clone();
    let span = crate::trace::producer_span(
        "addFlow",
        queue.name(),
        Some(&root.name),
        root.options.get_trace(),
    );
    // Prepared inside the span: every job of the flow carries the span's context.
    let prepared = span.in_scope(|| root.prepare("root", None))?;
    let claims = claims::claims(&prepared)?;
    let conn = queue.connection();
    if conn.is_cluster() {
        crate::cluster::check_same_slot(conn.prefix(), prepared.queues())?;
    }
    queue.admit()?;
    let work = async {
        match crate::engine::add_flow(queue.connection(), &prepared, &claims).await? {
            FlowWrite::Added(ids) => Ok(AddedFlow::new(&queue, &prepared, ids)),
            FlowWrite::RootExists => {
                let id = prepared.options.job_id.clone().unwrap_or_default();
                let outcome = crate::engine::AddOutcome {
                    id,
                    duplicate: true,
                };
                let job = queue
                    .added(&prepared.name, &prepared.options, outcome)
                    .await?;
                Ok(AddedFlow {
                    job,
                    children: Vec::new(),
                })
            }
        }
    };
    let added = queue
        .timed("add_flow", work)
        .instrument(span.clone())
        .await?;
    crate::trace::record_job_id(&span, &added.job.id);
    Ok(added)
}
