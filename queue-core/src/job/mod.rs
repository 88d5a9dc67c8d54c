//! `Job<T>`: what a handler receives, and what it answers with.
//!
//! Everything a handler touches lives here: the job itself (with its link to Redis,
//! or the recording of a test job), its flow children's results, and [`JobError`].
//! This layer stands below the producers, the flows and the store, and imports none of
//! them: a handler's types do not depend on how its job was added.

pub(crate) mod batch;
mod children;
mod error;
pub(crate) mod flow;
mod info;
mod link;
mod state;
pub(crate) mod testing;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::Serialize;

pub use children::{ChildKey, ChildResults, FailedChild};
pub use error::JobError;
pub(crate) use error::SharedFailure;
pub use info::{JobInfo, ParentJob};
pub use state::{JobCounts, JobState};

pub(crate) use children::RawChildren;
pub(crate) use link::{CancelSignal, CancelSource, JobWriter, LockLost};

use crate::clock::now_ms;
use crate::encryption::{Field, Sealer};
use crate::error::Error;
use crate::options::JobOptions;

/// Facts about a job that do not depend on its payload type.
#[derive(Debug, Clone)]
pub(crate) struct JobMeta {
    pub(crate) id: String,
    pub(crate) name: String,
    /// Shared with the worker: the same for every job of a queue.
    pub(crate) queue: Arc<str>,
    pub(crate) attempts_made: u32,
    /// Starts so far, this one included; more than `attempts_made + 1` means an
    /// earlier start never finished (its worker died or stalled).
    pub(crate) attempts_started: u32,
    pub(crate) timestamp_ms: u64,
    pub(crate) options: JobOptions,
}

impl JobMeta {
    /// This attempt's number, 1-based.
    pub(crate) fn attempt(&self) -> u32 {
        self.attempts_made + 1
    }

    /// Attempts allowed in total.
    pub(crate) fn max_attempts(&self) -> u32 {
        self.options.attempts.unwrap_or(1)
    }
}

/// Where progress and log lines go: Redis for a real job, memory for a test job.
#[derive(Debug, Clone)]
pub(crate) enum JobContext {
    Live(Arc<dyn JobWriter>),
    Test(Arc<testing::Recorder>),
}

/// One attempt of a job, as a handler sees it: the typed payload plus its metadata,
/// progress and log writers, and the cancellation signal.
///
/// ```
/// use queue_core::{Job, JobError};
///
/// #[derive(serde::Deserialize)]
/// struct WelcomeEmail { to: String }
///
/// async fn send_welcome(job: Job<WelcomeEmail>) -> Result<(), JobError> {
///     job.log(format!("sending to {}", job.data.to)).await?;
///     job.update_progress(100).await?;
///     Ok(())
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// // Handlers are plain functions: call them directly in a unit test.
/// let job = Job::for_test(WelcomeEmail { to: "ada@example.com".into() });
/// let handle = job.test_handle();
/// send_welcome(job).await.unwrap();
/// assert_eq!(handle.logs(), ["sending to ada@example.com"]);
/// # });
/// ```
#[derive(Debug)]
pub struct Job<T> {
    /// The payload.
    pub data: T,
    meta: Arc<JobMeta>,
    ctx: JobContext,
    cancel: CancelSignal,
    /// Its queue's sealing: the app's keys, to open its flow children's sealed values,
    /// and whether its log lines are sealed.
    sealer: Option<Sealer>,
    /// Its place in a batch, when a batch handler runs it (#46); boxed, so that a job
    /// of a single handler pays a pointer's width.
    batch: Option<Box<batch::Ticket>>,
}

impl<T> Job<T> {
    pub(crate) fn from_parts(
        data: T,
        meta: Arc<JobMeta>,
        ctx: JobContext,
        cancel: CancelSignal,
    ) -> Self {
        Job {
            data,
            meta,
            ctx,
            cancel,
            sealer: None,
            batch: None,
        }
    }

    /// A job that is not in Redis, for calling a handler directly in a unit test.
    ///
    /// Its id is `test-job`, its name `test`, its queue `test`; progress and log
    /// lines are recorded in memory and read through [`Job::test_handle`].
    pub fn for_test(data: T) -> Self {
        Job::in_process(data, "test", "test-job", "test", 0, JobOptions::default())
    }

    /// A job run in this process without Redis (an inline app's), with what a worker
    /// would give its handler.
    pub(crate) fn in_process(
        data: T,
        queue: &str,
        id: &str,
        name: &str,
        attempts_made: u32,
        options: JobOptions,
    ) -> Self {
        let meta = JobMeta {
            id: id.to_owned(),
            name: name.to_owned(),
            queue: Arc::from(queue),
            attempts_made,
            attempts_started: attempts_made + 1,
            timestamp_ms: now_ms(),
            options,
        };
        let recorder = Arc::new(testing::Recorder::default());
        Job::from_parts(
            data,
            Arc::new(meta),
            JobContext::Test(recorder),
            CancelSignal::new(),
        )
    }

    /// For a test job: set the id, name and attempts already made.
    pub fn with_test_meta(mut self, id: &str, name: &str, attempts_made: u32) -> Self {
        let meta = Arc::make_mut(&mut self.meta);
        meta.id = id.to_owned();
        meta.name = name.to_owned();
        meta.attempts_made = attempts_made;
        self
    }

    /// For a test job: a completed flow child, `id` of `queue`, that returned `value`
    /// (read by [`Job::child_results`]).
    pub fn with_child_result(self, queue: &str, id: &str, value: impl Serialize) -> Self {
        if let JobContext::Test(recorder) = &self.ctx {
            let value = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
            lock(&recorder.children)
                .completed
                .push((format!("test:{queue}:{id}"), value));
        }
        self
    }

    /// For a test job: a flow child, `id` of `queue`, that failed with `reason` while
    /// its policy let this job run.
    pub fn with_failed_child(self, queue: &str, id: &str, reason: &str) -> Self {
        if let JobContext::Test(recorder) = &self.ctx {
            lock(&recorder.children)
                .failed
                .push((format!("test:{queue}:{id}"), reason.to_owned()));
        }
        self
    }

    /// For a test job: a handle to read what the handler recorded and to cancel it.
    /// For a real job the handle records nothing.
    pub fn test_handle(&self) -> testing::TestJobHandle {
        let recorder = match &self.ctx {
            JobContext::Test(recorder) => Some(recorder.clone()),
            JobContext::Live(_) => None,
        };
        testing::TestJobHandle::new(recorder, self.cancel.clone())
    }

    /// The facts that do not depend on the payload, shared (the worker keeps them for
    /// the attempt's bookkeeping without copying them).
    pub(crate) fn meta(&self) -> &Arc<JobMeta> {
        &self.meta
    }

    /// The job id.
    pub fn id(&self) -> &str {
        &self.meta.id
    }

    /// The job name.
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// The queue the job came from.
    pub fn queue(&self) -> &str {
        &self.meta.queue
    }

    /// Attempts finished before this one (0 on the first run).
    pub fn attempts_made(&self) -> u32 {
        self.meta.attempts_made
    }

    /// This attempt's number, 1-based.
    pub fn attempt(&self) -> u32 {
        self.meta.attempt()
    }

    /// Whether an earlier run of this job was lost (its worker died or stalled) and
    /// this run is the recovery.
    pub fn recovered_from_stall(&self) -> bool {
        self.meta.attempts_started > self.meta.attempts_made + 1
    }

    /// Attempts allowed in total.
    pub fn max_attempts(&self) -> u32 {
        self.meta.max_attempts()
    }

    /// For a first attempt, how long the job waited since it was due (added, or its
    /// delay over); `None` for a retry, whose due time (after its backoff) is not kept.
    #[cfg(feature = "metrics")]
    pub(crate) fn waited(&self) -> Option<Duration> {
        if self.attempt() > 1 {
            return None;
        }
        let delay = self.meta.options.get_delay().unwrap_or_default();
        let due = self.timestamp() + delay;
        Some(SystemTime::now().duration_since(due).unwrap_or_default())
    }

    /// When the job was added.
    pub fn timestamp(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.meta.timestamp_ms)
    }

    /// The W3C trace id of the request that added the job, if any (see [`crate::trace`]).
    pub fn trace_id(&self) -> Option<&str> {
        self.trace_context().map(|ctx| ctx.trace_id())
    }

    /// The trace context the job carries, from whichever producer added it (ours, or
    /// Node's with `bullmq-otel`); its attempts continue it.
    pub fn trace_context(&self) -> Option<&crate::trace::TraceContext> {
        self.meta.options.trace.as_ref()
    }

    /// The options the job was added with.
    pub fn options(&self) -> &JobOptions {
        &self.meta.options
    }

    /// Report progress: a number (percent by convention) or any JSON value.
    /// Visible in the job's status and as a `progress` event.
    pub async fn update_progress(&self, progress: impl Serialize) -> Result<(), Error> {
        let value = serde_json::to_value(progress).map_err(|source| Error::Serialize {
            what: "progress",
            source,
        })?;
        match &self.ctx {
            JobContext::Live(live) => live.update_progress(value).await,
            JobContext::Test(recorder) => {
                recorder.record_progress(value);
                Ok(())
            }
        }
    }

    /// Append a line to the job's log (readable with `Queue::get_job_logs`). On a queue
    /// that seals its log lines
    /// ([`encrypt_failures_and_logs`](crate::QueueAppBuilder::encrypt_failures_and_logs)),
    /// the line is stored sealed.
    pub async fn log(&self, line: impl AsRef<str>) -> Result<(), Error> {
        let sealed = match &self.sealer {
            Some(sealer) if sealer.seals_notes() => {
                Some(sealer.seal_text(Field::Log, line.as_ref())?)
            }
            _ => None,
        };
        let line = sealed.as_deref().unwrap_or(line.as_ref());
        match &self.ctx {
            JobContext::Live(live) => live.log(line).await,
            JobContext::Test(recorder) => {
                recorder.record_log(line);
                Ok(())
            }
        }
    }

    /// What this job's flow children returned, each as an `R`, and the failures it was
    /// allowed past (see [`ChildResults`]). A handler that takes `ChildResults<R>` as its
    /// second argument gets this read for it; empty for a job without children.
    ///
    /// A child's value that does not fit `R` is an unrecoverable error naming the child;
    /// a Redis error is a retryable one.
    pub async fn child_results<R: DeserializeOwned>(&self) -> Result<ChildResults<R>, JobError> {
        let raw = match &self.ctx {
            JobContext::Live(live) => live.children().await?,
            JobContext::Test(recorder) => lock(&recorder.children).clone(),
        };
        ChildResults::from_raw(raw, self.sealer.as_ref().map(Sealer::keys))
    }

    /// Removes this job's flow children that have not started (running ones are left
    /// alone). A parent released early by a child's failure
    /// ([`OnChildFailure::ContinueParent`](crate::OnChildFailure::ContinueParent)) has
    /// this done for it before it runs, and runs only once no child it waits for is
    /// running.
    pub async fn remove_pending_children(&self) -> Result<(), Error> {
        match &self.ctx {
            JobContext::Live(live) => live.remove_pending_children().await,
            JobContext::Test(_) => Ok(()),
        }
    }

    /// Whether someone asked to cancel this job (`Queue::cancel`, from any process).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Resolves when someone asks to cancel this job. Use it in `tokio::select!`
    /// to stop long work early; the job then ends failed as cancelled, without retries.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    pub(crate) fn cancel_signal(&self) -> CancelSignal {
        self.cancel.clone()
    }

    /// Replaces the payload, keeping everything else (used by the dispatcher).
    pub(crate) fn map_data<U>(self, f: impl FnOnce(T) -> U) -> Job<U> {
        Job {
            data: f(self.data),
            meta: self.meta,
            ctx: self.ctx,
            cancel: self.cancel,
            sealer: self.sealer,
            batch: self.batch,
        }
    }

    /// This job, with its place in a batch.
    pub(crate) fn in_batch(mut self, ticket: batch::Ticket) -> Self {
        self.batch = Some(Box::new(ticket));
        self
    }

    /// Whether the job has its place in a batch.
    pub(crate) fn is_in_batch(&self) -> bool {
        self.batch.is_some()
    }

    /// Its place in a batch, taken out (a batch handler's attempt hands it in).
    pub(crate) fn take_batch_ticket(&mut self) -> Option<batch::Ticket> {
        self.batch.take().map(|ticket| *ticket)
    }

    /// This job, with its queue's sealing.
    pub(crate) fn with_sealer(mut self, sealer: &Sealer) -> Self {
        self.sealer = Some(sealer.clone());
        self
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
