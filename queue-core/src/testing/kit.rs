//! [`TestApp`]: an app under a private prefix of a real Redis, deleted on drop, with
//! what tests ask of it: what was enqueued, one handler run, a queue drained.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{delete_keys, unique_prefix};
use crate::app::{QueueApp, QueueAppBuilder};
use crate::backend::{Connection, Endpoint};
use crate::connection::Tls;
use crate::contract::{JobType, QueueType};
use crate::encryption::Field;
use crate::error::Error;
use crate::events::WorkerEvent;
use crate::job::{Job, JobError, JobState};
use crate::options::JobOptions;

/// How long [`TestApp::drain`] waits for a queue to empty, unless told otherwise.
pub const DEFAULT_DRAIN_DEADLINE: Duration = Duration::from_secs(30);

/// The states a job waits in before a worker takes it.
const ENQUEUED: [JobState; 4] = [
    JobState::Waiting,
    JobState::Delayed,
    JobState::Prioritized,
    JobState::WaitingChildren,
];

/// An app built under a prefix no other test uses, on the builder's Redis; every key
/// under that prefix is deleted when it is dropped (also when the test fails).
///
/// ```no_run
/// # async fn demo() -> queue_core::Result<()> {
/// use queue_core::prelude::*;
/// use queue_core::testing::TestApp;
///
/// async fn double(job: Job<u32>) -> Result<u32, JobError> { Ok(job.data * 2) }
///
/// let kit = TestApp::new(
///     QueueApp::builder().processor(Processor::new("math").job("double", double)),
/// )
/// .await?;
/// kit.app().queue::<u32>("math")?.add("double", 21, JobOptions::new()).await?;
/// let drained = kit.drain_queue("math").await?;
/// assert_eq!(drained[0].attempts, 1);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TestApp {
    app: QueueApp,
    cleanup: Cleanup,
    drain_deadline: Duration,
}

/// What the drop needs to delete the keys: a connection of its own, on a runtime of
/// its own (the test's may be shutting down).
#[derive(Debug, Clone)]
struct Cleanup {
    endpoint: Endpoint,
    tls: Option<Tls>,
    prefix: String,
}

/// A job waiting in a queue, as [`TestApp::enqueued`] reads it back.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Enqueued<T> {
    /// The job id.
    pub id: String,
    /// The job name.
    pub name: String,
    /// The payload, typed.
    pub data: T,
    /// Its state: waiting, delayed, prioritized or waiting for children.
    pub state: JobState,
    /// The options it was stored with (attempts, backoff, job id, ...).
    pub options: JobOptions,
    /// Its delay, as stored.
    pub delay: Duration,
    /// Its priority (0 when none).
    pub priority: u32,
}

/// What became of one job in a [`TestApp::drain`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Drained {
    /// The job id.
    pub id: String,
    /// The job name.
    pub name: String,
    /// Attempts it took.
    pub attempts: u32,
    /// How it ended.
    pub outcome: DrainOutcome,
}

/// How a drained job ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DrainOutcome {
    /// Its handler returned this value (as JSON).
    Completed(serde_json::Value),
    /// Its last attempt failed with this reason.
    Failed(String),
}

impl TestApp {
    /// Builds `builder`'s app under a fresh test prefix (a hash tag on a cluster), and
    /// connects.
    pub async fn new(builder: QueueAppBuilder) -> Result<Self, Error> {
        let label = unique_prefix("app");
        let prefix = match builder.endpoint() {
            Endpoint::Cluster(_) => format!("{{{label}}}"),
            Endpoint::Single(_) | Endpoint::Sentinel(_) => label,
        };
        let cleanup = Cleanup {
            endpoint: builder.endpoint().clone(),
            tls: builder.tls_settings().cloned(),
            prefix: prefix.clone(),
        };
        let app = builder.prefix(prefix).build().await?;
        Ok(TestApp {
            app,
            cleanup,
            drain_deadline: DEFAULT_DRAIN_DEADLINE,
        })
    }

    /// How long [`drain`](Self::drain) waits for the queue to empty (default 30 s).
    pub fn drain_deadline(mut self, deadline: Duration) -> Self {
        self.drain_deadline = deadline;
        self
    }

    /// The app.
    pub fn app(&self) -> &QueueApp {
        &self.app
    }

    /// The jobs of type `J` waiting in its queue (not yet run), oldest first.
    pub async fn enqueued<J: JobType>(&self) -> Result<Vec<Enqueued<J>>, Error> {
        self.enqueued_in(<J::Queue as QueueType>::NAME, J::NAME)
            .await
    }

    /// The jobs named `name` waiting in `queue`, their payload read as `T`, oldest first.
    pub async fn enqueued_in<T: DeserializeOwned>(
        &self,
        queue: &str,
        name: &str,
    ) -> Result<Vec<Enqueued<T>>, Error> {
        let queue = self.app.queue::<()>(queue)?;
        let mut found = Vec::new();
        for state in ENQUEUED {
            for info in queue.get_jobs_oldest_first(&[state], 0..10_000).await? {
                if info.name != name {
                    continue;
                }
                // A test reads the payload its code enqueued: opened, when sealed.
                let info = queue.open(info)?;
                let data = info.data_as::<T>().map_err(|source| Error::Serialize {
                    what: "an enqueued job's data, read back as the asked type",
                    source,
                })?;
                found.push((
                    info.timestamp_ms,
                    Enqueued {
                        id: info.id,
                        name: info.name,
                        data,
                        state,
                        options: info.options,
                        delay: info.delay,
                        priority: info.priority,
                    },
                ));
            }
        }
        found.sort_by_key(|(timestamp, _)| *timestamp);
        Ok(found.into_iter().map(|(_, job)| job).collect())
    }

    /// Runs the app's handler of `J` once on `job`, with its dependencies, without Redis
    /// (see [`run_handler`]).
    pub async fn run<J: JobType>(&self, job: J) -> Result<J::Output, JobError> {
        run_handler(&self.app, job).await
    }

    /// Drains the declared queue `Q`; see [`drain_queue`](Self::drain_queue).
    pub async fn drain<Q: QueueType>(&self) -> Result<Vec<Drained>, Error> {
        self.drain_queue(Q::NAME).await
    }

    /// Runs `queue`'s workers in this process until no job waits, is delayed or runs
    /// there any more, promoting delayed jobs and retries as soon as they are delayed
    /// (no delay or backoff is waited out). Returns what happened to each job that ran,
    /// in the order they first started. Fails when the queue is still busy after the
    /// drain deadline, and when the app has no processor for `queue`.
    pub async fn drain_queue(&self, queue: &str) -> Result<Vec<Drained>, Error> {
        let handle = self.app.queue::<()>(queue)?;
        // Collected as they come: the channel keeps the last 1,024 events only, and a
        // drain of a few hundred jobs makes more.
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let collector = tokio::spawn(collect_events(self.app.worker_events(), stopped));
        let workers = self.app.start_workers_for(&[queue]).await?;
        let started = tokio::time::Instant::now();
        let emptied = loop {
            handle.promote_all().await?;
            let counts = handle.get_job_counts().await?;
            if counts.waiting + counts.delayed + counts.prioritized + counts.active == 0 {
                break true;
            }
            if started.elapsed() > self.drain_deadline {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        workers.shutdown(self.drain_deadline).await;
        let _ = stop.send(());
        let events = collector.await.unwrap_or_default();
        if !emptied {
            return Err(Error::invalid(
                "drain",
                format!(
                    "queue `{}` still had jobs after {:?}; a job that waits on something that never comes, or a deadline too short (TestApp::drain_deadline)",
                    handle.name(),
                    self.drain_deadline
                ),
            ));
        }
        Ok(outcomes(handle.name(), events))
    }
}

/// The worker events sent until `stopped`, in order.
async fn collect_events(
    mut events: crate::events::WorkerEvents,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) -> Vec<WorkerEvent> {
    let mut seen = Vec::new();
    loop {
        tokio::select! {
            biased;
            event = events.recv() => match event {
                Some(event) => seen.push(event),
                None => return seen,
            },
            _ = &mut stopped => {
                while let Some(event) = events.try_recv() {
                    seen.push(event);
                }
                return seen;
            }
        }
    }
}

/// What became of each job of `queue`, from its worker events, in the order they first
/// started.
fn outcomes(queue: &str, events: Vec<WorkerEvent>) -> Vec<Drained> {
    let mut order: Vec<String> = Vec::new();
    let mut drained: BTreeMap<String, Drained> = BTreeMap::new();
    for event in events {
        if event.queue() != queue {
            continue;
        }
        // An attempt's start, or the job's end (a failure with a retry to come is
        // neither).
        let (id, name, step) = match event {
            WorkerEvent::Active {
                job_id,
                name,
                attempt,
                ..
            } => (job_id, name, Err(attempt)),
            WorkerEvent::Completed {
                job_id,
                name,
                return_value,
                ..
            } => (job_id, name, Ok(DrainOutcome::Completed(return_value))),
            WorkerEvent::Failed {
                job_id,
                name,
                reason,
                is_final: true,
                ..
            } => (job_id, name, Ok(DrainOutcome::Failed(reason))),
            _ => continue,
        };
        let entry = drained.entry(id.clone()).or_insert_with(|| {
            order.push(id.clone());
            Drained {
                id,
                name,
                attempts: 0,
                outcome: DrainOutcome::Failed("did not finish".to_owned()),
            }
        });
        match step {
            Err(attempt) => entry.attempts = entry.attempts.max(attempt),
            Ok(outcome) => entry.outcome = outcome,
        }
    }
    order
        .into_iter()
        .filter_map(|id| drained.remove(&id))
        .collect()
}

impl Drop for TestApp {
    fn drop(&mut self) {
        let cleanup = self.cleanup.clone();
        // A thread and a runtime of its own: this may run on the test's runtime, while
        // it unwinds from a failed assertion.
        let done = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let conn = Connection::open(
                    &cleanup.endpoint,
                    cleanup.tls.as_ref(),
                    &cleanup.prefix,
                    Duration::from_secs(5),
                    Duration::from_secs(5),
                )
                .await
                .ok()?;
                delete_keys(&conn).await.ok()
            })
        })
        .join();
        if !matches!(done, Ok(Some(_))) {
            tracing::warn!(prefix = %self.cleanup.prefix, "TestApp could not delete its keys");
        }
    }
}

/// Runs `app`'s handler of `J` once on `job`, as a worker would (the payload through
/// JSON, the dependencies, the processor's timeout, a panic as a failure), without
/// Redis: the job is not stored, and its logs and progress go nowhere. For an app of
/// any kind, [`TestApp`]'s, an inline one, or one of your own.
///
/// ```
/// # async fn demo() -> queue_core::Result<()> {
/// use queue_core::prelude::*;
/// use queue_core::testing::run_handler;
///
/// #[derive(Serialize, Deserialize)]
/// pub struct Double(pub u32);
///
/// #[job_queue("math")]
/// pub enum Math {
///     #[job("double", output = u32)]
///     Double(Double),
/// }
///
/// async fn double(job: Job<Double>) -> Result<u32, JobError> { Ok(job.data.0 * 2) }
///
/// let app = QueueApp::builder()
///     .processor(Processor::of::<Math>().handle(double))
///     .build_inline()?;
/// assert_eq!(run_handler(&app, Double(21)).await.ok(), Some(42));
/// # Ok(()) }
/// ```
pub async fn run_handler<J: JobType>(app: &QueueApp, job: J) -> Result<J::Output, JobError> {
    let queue = <J::Queue as QueueType>::NAME;
    let value = run_named(app, queue, J::NAME, &job).await?;
    serde_json::from_value(value).map_err(|e| {
        JobError::unrecoverable_msg(format!(
            "the handler's return value does not read back as {}: {e}",
            std::any::type_name::<J::Output>()
        ))
    })
}

/// [`run_handler`] for a job named by string.
async fn run_named<T: Serialize>(
    app: &QueueApp,
    queue: &str,
    name: &str,
    data: &T,
) -> Result<serde_json::Value, JobError> {
    let (plan, planned) = app.planned(queue, name).ok_or_else(|| {
        JobError::unrecoverable_msg(format!(
            "no handler of this app takes job `{name}` on queue `{queue}`"
        ))
    })?;
    let unserializable = |e: &dyn std::fmt::Display| {
        JobError::unrecoverable_msg(format!("cannot serialize the payload: {e}"))
    };
    // Sealed as an add would seal it, so that a test of an encrypted queue runs what
    // production runs (and fails the same way without a keyring).
    let data = if plan.sealer.seals() {
        let plain = serde_json::to_vec(data).map_err(|e| unserializable(&e))?;
        plan.sealer
            .seal(Field::Data, plain)
            .map_err(|e| unserializable(&e))?
    } else {
        serde_json::to_value(data).map_err(|e| unserializable(&e))?
    };
    let job = Job::in_process(data, queue, "test-job", name, 0, JobOptions::default());
    let run = plan.run(planned, job, &app.handler_deps());
    // The kit's job has no options of its own: the processor's timeout, or the batch's.
    let timeout = planned.attempt_timeout(None);
    let value = crate::handler::attempt(run, timeout)
        .await
        .map_err(|(reason, retryable)| match retryable {
            true => JobError::retry(reason),
            false => JobError::unrecoverable_msg(reason),
        })?;
    plan.sealer
        .open(Field::ReturnValue, value)
        .map_err(|e| JobError::unrecoverable_msg(format!("the return value: {e}")))
}
