//! Flows: a parent job and its children, across queues, added atomically; the parent
//! runs once its children are done and reads their results as typed values
//! ([`ChildResults`](crate::ChildResults)).

use std::time::Duration;

use serde::Serialize;
use tracing::Instrument;

pub use crate::error::flow::{ExistingJobConflict, FlowError};

/// The old name of [`ExistingJobConflict`].
#[deprecated(since = "0.2.0", note = "renamed `ExistingJobConflict`")]
pub type ExistingJob = ExistingJobConflict;
pub use crate::job::flow::OnChildFailure;

use crate::contract::{JobOf, JobType, QueueType};
use crate::error::Error;
use crate::job::flow::{claims, AddedIds, FlowWrite, PreparedJob};
use crate::job::JobState;
use crate::options::JobOptions;
use crate::queue::{AddedJob, JobLink, Queue};
use crate::watch::JobOutcome;

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
            data: self.to_value(&data).map_err(|e| e.to_string()),
            options: JobOptions::default(),
            children: Vec::new(),
        }
    }
}

impl<Q: QueueType> Queue<Q> {
    /// `job` as a job of a flow, as [`flow_job`](Queue::flow_job) makes it.
    pub fn flow_job_of<J: JobOf<Q>>(&self, job: J) -> FlowJob {
        self.retyped::<J>().flow_job(J::NAME, job)
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
            JobState::initial(&prepared.options)
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
impl AddedFlow {
    /// Waits up to `timeout` for the flow's root to finish, as [`AddedJob::wait`].
    pub async fn wait(&self, timeout: Duration) -> Result<JobOutcome<serde_json::Value>, Error> {
        self.job.wait(timeout).await
    }

    /// The root's typed output, as [`AddedJob::wait_for`].
    pub async fn wait_for<J: JobType>(
        &self,
        timeout: Duration,
    ) -> Result<JobOutcome<J::Output>, Error> {
        self.job.wait_for::<J>(timeout).await
    }
}

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
    let claims = claims(&prepared)?;
    let backend = queue.backend();
    if backend.is_cluster() {
        crate::connection::check_same_slot(backend.prefix(), prepared.queues())?;
    }
    queue.admit()?;
    let work = async {
        let conn = backend.redis("add_flow")?;
        match crate::backend::add_flow(conn, &prepared, &claims).await? {
            FlowWrite::Added(ids) => Ok(AddedFlow::new(&queue, &prepared, ids)),
            FlowWrite::RootExists => {
                let id = prepared.options.job_id.clone().unwrap_or_default();
                let outcome = crate::backend::AddOutcome {
                    id,
                    duplicate: true,
                    state: None,
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
