//! [`Queue<T>`](Queue): the typed producer, and the calls that read and manage a queue
//! and its jobs; with what they answer.

mod cancel;
mod groups;
mod inspect;
mod manage;
mod operator;
#[cfg(feature = "sqlx")]
mod outbox;
#[cfg(feature = "sqlx")]
mod relayed;
mod schedulers;
mod typed;
mod wait;

use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde::Serialize;
use tracing::Instrument;

pub use crate::snapshot::{
    ChildJob, Children, GlobalLimits, JobFilter, JobLogs, JobScan, JobSummary, PerMinuteSeries,
    ScanLimits, SchedulerInfo, WorkerInfo,
};

/// The old name of [`PerMinuteSeries`].
#[deprecated(since = "0.2.0", note = "renamed `PerMinuteSeries`")]
pub type Outcome = PerMinuteSeries;
pub use cancel::CancelOutcome;
#[cfg(feature = "sqlx")]
pub(crate) use relayed::{Refusal, Relayed, RowJob};

use crate::backend::{AddOutcome, Backend, EngineQueue, QueueBackend};
use crate::encryption::{open_in, open_text_in, Field, Keys, Sealer, Seals};
use crate::error::Error;
use crate::job::JobState;
use crate::options::{BackoffRegistry, JobOptions};

/// What one queue's handles share: its backend (the engine's handle, opened on first
/// use) and the app settings `add` applies.
#[derive(Debug)]
pub(crate) struct QueueShared {
    name: String,
    /// The app's backend, for handles on other queues (a flow's).
    app_backend: Backend,
    backend: QueueBackend,
    settings: ProducerSettings,
    /// This queue's default job options over the app's.
    defaults: JobOptions,
    /// Whether its payloads are sealed, and the keys.
    sealer: Sealer,
}

/// What may refuse an add before it is sent: the Redis memory guard (`crate::health`),
/// above its high-water mark. Read on every add, so it answers from memory.
pub(crate) trait AddGate: Send + Sync + std::fmt::Debug {
    /// `Err` refuses the add, saying why and when to try again.
    fn admit(&self) -> Result<(), Error>;
}

/// The app settings every queue handle applies.
#[derive(Debug, Clone)]
pub(crate) struct ProducerSettings {
    pub(crate) defaults: JobOptions,
    /// Default job options of some queues, over `defaults`.
    pub(crate) queue_defaults: Arc<std::collections::HashMap<String, JobOptions>>,
    pub(crate) max_payload_bytes: usize,
    pub(crate) backoffs: BackoffRegistry,
    pub(crate) command_timeout: Duration,
    /// The app's watchers of jobs: one event reader per queue, shared.
    pub(crate) watch: Arc<crate::watch::JobWatch>,
    /// Where `add_in` writes jobs.
    #[cfg(feature = "sqlx")]
    pub(crate) outbox: Option<crate::store::Outbox>,
    /// The Redis memory guard: above its mark, adds are refused before they are sent.
    pub(crate) memory: Option<Arc<dyn AddGate>>,
    /// The app's keyring.
    pub(crate) keys: Keys,
    /// The queues whose payloads are sealed.
    pub(crate) sealed_queues: Arc<std::collections::BTreeSet<String>>,
    /// Whether they seal failure reasons and log lines too.
    pub(crate) seal_notes: bool,
    /// The queues this app processes without groups: a grouped job added to one would
    /// wait in its group, where those workers never look (refused at `add`).
    pub(crate) ungrouped_processed: Arc<std::collections::BTreeSet<String>>,
}

impl ProducerSettings {
    /// The default job options of `queue`: its own over the app's.
    pub(crate) fn defaults_for(&self, queue: &str) -> JobOptions {
        match self.queue_defaults.get(queue) {
            Some(own) => own.clone().over(&self.defaults),
            None => self.defaults.clone(),
        }
    }

    /// `queue`'s sealer: it seals when the app was told so.
    pub(crate) fn sealer_for(&self, queue: &str) -> Sealer {
        self.keys.for_queue(
            queue,
            Seals::of(self.sealed_queues.contains(queue), self.seal_notes),
        )
    }
}

impl QueueShared {
    pub(crate) fn new(name: &str, backend: &Backend, settings: ProducerSettings) -> Self {
        QueueShared {
            name: name.to_owned(),
            app_backend: backend.clone(),
            backend: backend.queue(name),
            defaults: settings.defaults_for(name),
            sealer: settings.sealer_for(name),
            settings,
        }
    }
}

/// A typed producer (and manager) for one queue. Get it with
/// [`QueueApp::queue`](crate::QueueApp::queue); clones share everything.
///
/// ```no_run
/// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
/// use std::time::Duration;
/// use queue_core::{Backoff, JobOptions, Retention};
///
/// #[derive(serde::Serialize)]
/// struct WelcomeEmail { user_id: u64, to: String }
///
/// let email = app.queue::<WelcomeEmail>("email")?;
/// let added = email
///     .add(
///         "welcome",
///         WelcomeEmail { user_id: 42, to: "ada@example.com".into() },
///         JobOptions::new()
///             .job_id("welcome-42")
///             .attempts(5)
///             .backoff(Backoff::exponential(Duration::from_secs(3)))
///             .remove_on_complete(Retention::Last(100)),
///     )
///     .await?;
/// if added.duplicate {
///     println!("already queued as {}", added.id);
/// }
/// # Ok(()) }
/// ```
pub struct Queue<T> {
    shared: Arc<QueueShared>,
    _payload: PhantomData<fn(T)>,
}

impl<T> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Queue {
            shared: self.shared.clone(),
            _payload: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("name", &self.shared.name)
            .field("payload", &std::any::type_name::<T>())
            .finish()
    }
}

/// The result of an `add`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AddedJob {
    /// The queue.
    pub queue: String,
    /// The job id (the existing job's, for a duplicate).
    pub id: String,
    /// The job name.
    pub name: String,
    /// A job with this id (or deduplication id) already existed: nothing was added.
    pub duplicate: bool,
    /// The state the new job starts in (for a duplicate: the existing job's state
    /// when it was looked up, `None` if it finished and was removed since).
    pub state: Option<JobState>,
    /// The queue, for [`wait`](AddedJob::wait).
    #[serde(skip)]
    pub(crate) link: JobLink,
}

/// The queue an [`AddedJob`] was added to, for its `wait`. Not part of what the job
/// *is*: two answers for the same job are equal whichever handle added them.
#[derive(Clone)]
pub(crate) struct JobLink(Queue<()>);

impl JobLink {
    pub(crate) fn to<T>(queue: &Queue<T>) -> Self {
        JobLink(queue.retyped())
    }
}

impl std::fmt::Debug for JobLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name())
    }
}

impl PartialEq for JobLink {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for JobLink {}

/// One job of an [`add_bulk`](Queue::add_bulk) call.
#[derive(Debug, Clone)]
#[must_use = "a bulk job does nothing until it is given to `add_bulk`"]
pub struct BulkJob<T> {
    name: String,
    data: T,
    options: JobOptions,
}

impl<T> BulkJob<T> {
    /// A job named `name` with default options.
    pub fn new(name: impl Into<String>, data: T) -> Self {
        BulkJob {
            name: name.into(),
            data,
            options: JobOptions::default(),
        }
    }

    /// Sets this job's options.
    pub fn options(mut self, options: JobOptions) -> Self {
        self.options = options;
        self
    }
}

impl<T> Queue<T> {
    pub(crate) fn new(shared: Arc<QueueShared>, _payload: PhantomData<fn(T)>) -> Self {
        Queue { shared, _payload }
    }

    /// The queue name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The engine's handle of this queue, for the calls that need Redis.
    pub(crate) async fn engine(&self) -> Result<&EngineQueue, Error> {
        self.shared.backend.engine().await
    }

    /// Runs `op` within the app's command timeout: with Redis down, the connection
    /// would otherwise wait out its whole reconnect schedule (tens of seconds).
    ///
    /// Not an async function: one would keep `op` in its future beside the timeout's
    /// own copy of it, and every add goes through here.
    pub(crate) fn timed<R, F>(
        &self,
        what: &'static str,
        op: F,
    ) -> impl Future<Output = Result<R, Error>>
    where
        F: Future<Output = Result<R, Error>>,
    {
        self.timed_for(what, self.shared.settings.command_timeout, op)
    }

    fn timed_for<R, F>(
        &self,
        what: &'static str,
        after: Duration,
        op: F,
    ) -> impl Future<Output = Result<R, Error>>
    where
        F: Future<Output = Result<R, Error>>,
    {
        tokio::time::timeout(after, op)
            .map(move |outcome| outcome.unwrap_or(Err(Error::Timeout { what, after })))
    }

    /// The same queue, for another payload type (flows hold their jobs' queues as JSON).
    pub(crate) fn retyped<U>(&self) -> Queue<U> {
        Queue::new(self.shared.clone(), PhantomData)
    }

    /// A handle on another queue of the same app (a flow's child may live in any).
    pub(crate) fn sibling(&self, name: &str) -> Queue<()> {
        let shared = QueueShared::new(name, &self.shared.app_backend, self.shared.settings.clone());
        Queue::new(Arc::new(shared), PhantomData)
    }

    /// Refuses an add while Redis's memory is above the guard's mark (checked after the
    /// job itself, so that a bad job is refused as such).
    pub(crate) fn admit(&self) -> Result<(), Error> {
        match &self.shared.settings.memory {
            Some(memory) => memory.admit(),
            None => Ok(()),
        }
    }

    /// The app's backend.
    pub(crate) fn backend(&self) -> &Backend {
        &self.shared.app_backend
    }

    /// Whether an add runs the job before it returns (an app built inline).
    #[cfg(feature = "sqlx")]
    pub(crate) fn runs_when_added(&self) -> bool {
        self.shared.backend.runs_when_added()
    }

    pub(crate) fn job_watch(&self) -> &Arc<crate::watch::JobWatch> {
        &self.shared.settings.watch
    }

    /// Refuses JSON over the app's payload size limit.
    pub(crate) fn check_size<D: Serialize + ?Sized>(&self, data: &D) -> Result<(), Error> {
        let limit = self.shared.settings.max_payload_bytes;
        let size = serialized_len(data).map_err(|source| Error::Serialize {
            what: "job data",
            source,
        })?;
        if size > limit {
            return Err(Error::oversized_payload(Some(size), limit));
        }
        Ok(())
    }

    /// This queue's sealer.
    pub(crate) fn sealer(&self) -> &Sealer {
        &self.shared.sealer
    }

    /// A job of this queue as stored, with its data and return value opened when they
    /// are sealed ([`encryption`](crate::encryption)). Reads such as
    /// [`get_job`](Queue::get_job) answer what Redis holds, so that a page that shows a
    /// job to a person shows a sealed payload as sealed; open it where the application
    /// decided its reader may see it. A job that is not sealed comes back as it is.
    ///
    /// ```no_run
    /// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
    /// let email = app.queue::<serde_json::Value>("email")?;
    /// if let Some(job) = email.get_job("welcome-42").await? {
    ///     let job = email.open(job)?;
    ///     println!("{}", job.data);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn open(&self, mut job: crate::job::JobInfo) -> Result<crate::job::JobInfo, Error> {
        let sealer = &self.shared.sealer;
        job.data = sealer.open(Field::Data, std::mem::take(&mut job.data))?;
        if let Some(value) = job.return_value.take() {
            job.return_value = Some(sealer.open(Field::ReturnValue, value)?);
        }
        // Sealed only on a queue that seals its failure reasons too.
        if let Some(reason) = job.failed_reason.take() {
            job.failed_reason = Some(sealer.open_text(Field::FailedReason, reason)?);
        }
        for entry in &mut job.stacktrace {
            *entry = sealer.open_text(Field::FailedReason, std::mem::take(entry))?;
        }
        Ok(job)
    }

    /// A job's log lines as [`get_job_logs`](Queue::get_job_logs) reads them, with
    /// sealed lines opened (a queue that seals them:
    /// [`encrypt_failures_and_logs`](crate::QueueAppBuilder::encrypt_failures_and_logs)).
    pub fn open_logs(&self, mut logs: JobLogs) -> Result<JobLogs, Error> {
        for line in &mut logs.lines {
            *line = self
                .shared
                .sealer
                .open_text(Field::Log, std::mem::take(line))?;
        }
        Ok(logs)
    }

    /// A failure reason of this queue's jobs opened when sealed; as it is otherwise.
    pub(crate) fn open_reason(&self, reason: String) -> Result<String, Error> {
        Ok(self.shared.sealer.open_text(Field::FailedReason, reason)?)
    }

    /// A flow parent's children as [`get_children`](Queue::get_children) reads them,
    /// with their sealed return values opened, as [`open`](Queue::open) does for a job
    /// (each with its own queue's name).
    pub fn open_children(&self, mut children: Children) -> Result<Children, Error> {
        let keys = Some(self.shared.sealer.keys());
        for child in &mut children.processed {
            if let Some(value) = child.return_value.take() {
                child.return_value = Some(open_in(keys, &child.queue, Field::ReturnValue, value)?);
            }
        }
        for failed in &mut children.failed {
            let reason = std::mem::take(&mut failed.reason);
            failed.reason = open_text_in(keys, &failed.child.queue, Field::FailedReason, reason)?;
        }
        Ok(children)
    }

    /// The queue's and the app's defaults applied, then every check `add` makes before
    /// writing.
    pub(crate) fn prepare(&self, options: JobOptions) -> Result<JobOptions, Error> {
        let options = options.or_defaults(&self.shared.defaults);
        options.validate()?;
        self.shared.settings.backoffs.check(&options)?;
        if let Some(group) = &options.group {
            if self
                .shared
                .settings
                .ungrouped_processed
                .contains(&self.shared.name)
            {
                return Err(Error::invalid(
                    "group",
                    format!(
                        "queue `{}` is processed in this app without groups, and its workers \
                         never take a grouped job (group `{group}`): give its processor \
                         `.groups(..)` (or `groups(..)` in `#[processor]`), or add the job \
                         without a group",
                        self.shared.name
                    ),
                ));
            }
        }
        Ok(options)
    }
}

impl<T: Serialize> Queue<T> {
    /// Adds a job. Bad options and oversized payloads are refused before anything is
    /// written. With a `job_id` that already exists, nothing is added and the result
    /// says `duplicate`.
    ///
    /// A dropped connection fails the first command after it. An `add` with a
    /// `job_id` is idempotent and is retried once; one without is not retried (it
    /// could add the job twice), so the caller sees the error.
    pub async fn add(
        &self,
        name: &str,
        data: T,
        mut options: JobOptions,
    ) -> Result<AddedJob, Error> {
        let span = crate::trace::producer_span("add", self.name(), Some(name), options.get_trace());
        // Prepared inside the span, when one is recorded: the job carries its context.
        // Into the same variable: this future keeps one copy of the options.
        options = if span.is_disabled() {
            self.prepare(options)?
        } else {
            span.in_scope(|| self.prepare(options))?
        };
        let data = self.payload(&data, &options)?;
        // The whole add in the span when it is recorded: an inline app's handler, the
        // retry's warning and the duplicate's state read too.
        let added = if span.is_disabled() {
            self.add_prepared(name, data, &options).await?
        } else {
            self.add_prepared(name, data, &options)
                .instrument(span.clone())
                .await?
        };
        crate::trace::record_job_id(&span, &added.id);
        Ok(added)
    }

    /// `data` as the JSON an add sends. Its size is checked here when Redis is asked
    /// something before the add (the duplicate check, or the queue's first open), or
    /// when the backend does not check it itself: a payload that is too big must be
    /// refused as such, before any I/O, even with Redis down.
    fn payload(&self, data: &T, options: &JobOptions) -> Result<serde_json::Value, Error> {
        let checked_here = options.may_be_duplicate() || !self.shared.backend.checks_payload_size();
        if checked_here {
            self.to_json(data)
        } else {
            self.to_value(data)
        }
    }

    /// Adds a job whose options are prepared and whose payload is JSON already.
    ///
    /// Every add passes here, so its future is kept small: no async function of the
    /// way down takes the payload or the options by value (each would keep its own
    /// copy of them in the future), and the rare branches are boxed.
    pub(crate) async fn add_prepared(
        &self,
        name: &str,
        data: serde_json::Value,
        options: &JobOptions,
    ) -> Result<AddedJob, Error> {
        self.admit()?;
        let limit = self.shared.settings.max_payload_bytes;
        // Only an add with a job id is retried, so only then is the payload kept.
        let retry_data = options.job_id.is_some().then(|| data.clone());
        let outcome = match (self.add_once(name, data, options, limit).await, retry_data) {
            // A dropped connection fails the first command after it; one with a job
            // id is safe to send again. A timeout is not retried: Redis is down.
            (Err(e @ Error::Redis(_)), Some(data)) => {
                tracing::warn!(queue = %self.name(), error = %e, "add failed; retrying once (idempotent: it has a job id)");
                Box::pin(self.add_once(name, data, options, limit)).await?
            }
            (other, _) => other?,
        };
        self.added(name, options, outcome).await
    }

    /// One engine add under the command timeout: the connection's deadline on its one
    /// command where it keeps one (a timer per add, not two), else one over the whole.
    fn add_once<'a>(
        &'a self,
        name: &'a str,
        data: serde_json::Value,
        options: &'a JobOptions,
        limit: usize,
    ) -> impl Future<Output = Result<AddOutcome, Error>> + 'a {
        let bounded = !options.may_be_duplicate() && self.shared.backend.bounds_single_adds();
        let add = self.shared.backend.add(name, data, options, limit);
        if bounded {
            futures::future::Either::Left(add)
        } else {
            futures::future::Either::Right(self.timed("add", add))
        }
    }

    /// Adds several jobs, pipelined (a round trip for the batch, and one more for each
    /// kind of add in it: plain, prioritized, delayed, grouped), and added in the order
    /// given: their ids rise with it, and jobs that wait alike run in it. Every job is
    /// checked first; one bad job refuses the whole batch, naming it.
    pub async fn add_bulk(&self, jobs: Vec<BulkJob<T>>) -> Result<Vec<AddedJob>, Error> {
        let span = crate::trace::producer_span("addBulk", self.name(), None, None);
        // Prepared inside the span: the jobs carry the span's context.
        let prepared = span.in_scope(|| self.prepare_bulk(jobs))?;
        self.add_prepared_bulk(prepared).instrument(span).await
    }

    /// Every job of a batch checked, with the app's defaults; the first bad one refuses
    /// the batch.
    fn prepare_bulk(
        &self,
        jobs: Vec<BulkJob<T>>,
    ) -> Result<Vec<(String, serde_json::Value, JobOptions)>, Error> {
        let mut prepared = Vec::with_capacity(jobs.len());
        for (index, job) in jobs.into_iter().enumerate() {
            let in_batch = |e: Error| match e {
                Error::InvalidOption { option, reason } => Error::InvalidOption {
                    option,
                    reason: format!("job #{index} ({}) of the batch: {reason}", job.name),
                },
                other => other,
            };
            let options = self.prepare(job.options.clone()).map_err(in_batch)?;
            // Checked here, not by the engine, so that the error names the job.
            let data = self.to_json(&job.data).map_err(in_batch)?;
            prepared.push((job.name, data, options));
        }
        Ok(prepared)
    }

    async fn add_prepared_bulk(
        &self,
        prepared: Vec<(String, serde_json::Value, JobOptions)>,
    ) -> Result<Vec<AddedJob>, Error> {
        self.admit()?;
        let names_and_options: Vec<(String, JobOptions)> = prepared
            .iter()
            .map(|(n, _, o)| (n.clone(), o.clone()))
            .collect();
        // A batch may take longer than one command: a timeout per started thousand jobs.
        let batches = u32::try_from(prepared.len().div_ceil(1000).max(1)).unwrap_or(u32::MAX);
        let after = self.shared.settings.command_timeout.saturating_mul(batches);
        let work = async {
            let outcomes = self.shared.backend.add_bulk(prepared).await?;
            let mut added = Vec::with_capacity(outcomes.len());
            for ((name, options), outcome) in names_and_options.iter().zip(outcomes) {
                added.push(self.added(name, options, outcome).await?);
            }
            Ok(added)
        };
        self.timed_for("add_bulk", after, work).await
    }

    /// `data` as JSON (sealed, when the queue seals), refused when over the app's size
    /// limit (`add` leaves the check to the engine, on the JSON it writes anyway).
    pub(crate) fn to_json(&self, data: &T) -> Result<serde_json::Value, Error> {
        if self.shared.sealer.seals() {
            // What is stored, the envelope, is what the limit is about.
            let sealed = self.to_value(data)?;
            self.check_size(&sealed)?;
            return Ok(sealed);
        }
        self.check_size(data)?;
        self.to_value(data)
    }

    /// `data` as JSON (sealed, when the queue seals), unchecked: the engine checks the
    /// size on the JSON it writes.
    pub(crate) fn to_value(&self, data: &T) -> Result<serde_json::Value, Error> {
        let unserializable = |source| Error::Serialize {
            what: "job data",
            source,
        };
        if self.shared.sealer.seals() {
            let plain = serde_json::to_vec(data).map_err(unserializable)?;
            return Ok(self.shared.sealer.seal(Field::Data, plain)?);
        }
        serde_json::to_value(data).map_err(unserializable)
    }

    /// What an add did, as the caller sees it: for a duplicate, the existing job's state.
    pub(crate) async fn added(
        &self,
        name: &str,
        options: &JobOptions,
        outcome: AddOutcome,
    ) -> Result<AddedJob, Error> {
        let state = match outcome.state {
            Some(known) => Some(known),
            // Only a duplicate's state must be read (under the command timeout). Boxed:
            // rare, and kept out of every add's future.
            None if outcome.duplicate => {
                Box::pin(async {
                    let engine = self.engine().await?;
                    self.timed("add", engine.get_job_state(&outcome.id)).await
                })
                .await?
            }
            None => Some(JobState::initial(options)),
        };
        Ok(AddedJob {
            queue: self.shared.name.clone(),
            id: outcome.id,
            name: name.to_owned(),
            duplicate: outcome.duplicate,
            state,
            link: JobLink::to(self),
        })
    }
}

/// The JSON size of `data`, without building the JSON.
fn serialized_len<T: Serialize + ?Sized>(data: &T) -> Result<usize, serde_json::Error> {
    struct Counter(usize);
    impl io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, data)?;
    Ok(counter.0)
}

#[cfg(not(feature = "sqlx"))]
impl<T> Queue<T> {
    pub(crate) fn has_outbox(&self) -> bool {
        false
    }

    pub(crate) async fn in_outbox(&self, _id: &str) -> Result<Option<crate::job::JobInfo>, Error> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::serialized_len;

    #[test]
    fn serialized_len_matches_the_json() {
        let value = serde_json::json!({"to": "ada@example.com", "n": [1, 2, 3]});
        assert_eq!(
            serialized_len(&value).unwrap(),
            serde_json::to_vec(&value).unwrap().len()
        );
    }
}
