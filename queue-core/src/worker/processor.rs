//! `Processor`: the explicit registration of a queue's handlers (what `#[processor]`
//! generates, and the fallback when a macro registration is not linked).

use std::marker::PhantomData;
use std::time::Duration;

use crate::contract::{JobOf, JobType, OutputOf, QueueType};
use crate::handler::{BatchHandler, ErasedHandler, Handler};
use crate::options::{Batching, WorkerOptions};

/// The handlers of one queue, and how its worker runs them.
///
/// ```
/// use std::time::Duration;
/// use queue_core::{Job, JobError, Processor};
///
/// async fn send_welcome(job: Job<String>) -> Result<(), JobError> { Ok(()) }
/// async fn send_other(job: Job<String>) -> Result<(), JobError> { Ok(()) }
///
/// let email = Processor::new("email")
///     .concurrency(5)
///     .timeout(Duration::from_secs(30))
///     .job("welcome", send_welcome)   // jobs named "welcome"
///     .any_job(send_other);           // every other name on this queue
/// # let _ = email;
/// ```
///
/// For a queue declared with [`#[job_queue]`](crate::job_queue), `Processor::of::<Q>()`
/// takes handlers by their payload type; a handler of another queue's job, or one that
/// returns something other than the declared output, does not compile:
///
/// ```
/// use queue_core::prelude::*;
///
/// #[derive(Serialize, Deserialize)]
/// pub struct WelcomeEmail { pub to: String }
///
/// #[job_queue("email")]
/// pub enum Email {
///     #[job("welcome", output = bool)]
///     Welcome(WelcomeEmail),
/// }
///
/// async fn send_welcome(job: Job<WelcomeEmail>) -> Result<bool, JobError> { Ok(true) }
///
/// let email = Processor::of::<Email>().concurrency(5).handle(send_welcome);
/// # let _ = email;
/// ```
#[must_use = "a processor does nothing until it is given to `QueueAppBuilder::processor`"]
pub struct Processor<Q = AnyQueue> {
    pub(crate) queue: String,
    /// More queues the same handlers serve, each with a worker of its own.
    pub(crate) also: Vec<String>,
    /// The worker's settings (merged with the queue's other processors at start-up).
    pub(crate) options: WorkerOptions,
    /// The attempt timeout of this processor's handlers.
    pub(crate) timeout: Option<Duration>,
    pub(crate) handlers: Vec<RegisteredHandler>,
    _queue: PhantomData<fn() -> Q>,
}

/// The queue type of a [`Processor`] made with [`Processor::new`]: any queue, job names
/// as strings.
#[derive(Debug, Clone, Copy)]
pub enum AnyQueue {}

impl<Q> Clone for Processor<Q> {
    fn clone(&self) -> Self {
        self.retyped()
    }
}

impl<Q> std::fmt::Debug for Processor<Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processor")
            .field("queue", &self.queue)
            .field("also", &self.also)
            .field("concurrency", &self.options.concurrency)
            .field("handlers", &self.handlers)
            .finish_non_exhaustive()
    }
}

/// One handler and the job name it claims (`None`: every name nobody else claims).
#[derive(Debug, Clone)]
pub(crate) struct RegisteredHandler {
    pub(crate) job_name: Option<String>,
    pub(crate) handler: ErasedHandler,
    pub(crate) label: String,
}

impl Processor {
    /// A processor for `queue`, with concurrency 1 and no handlers yet.
    pub fn new(queue: impl Into<String>) -> Self {
        Processor::named(queue.into())
    }

    /// A processor for the declared queue `Q`, whose handlers are matched to its jobs by
    /// their payload type ([`handle`](Processor::handle)).
    pub fn of<Q: QueueType>() -> Processor<Q> {
        Processor::named(Q::NAME.to_owned())
    }
}

impl<Q: QueueType> Processor<Q> {
    /// Handles the declared job whose payload `handler` takes: `async fn(Job<P>, Dep<A>,
    /// ..) -> Result<Output, JobError>`, with `P` a job of `Q` and `Output` the one its
    /// declaration names. The job name comes from the declaration.
    pub fn handle<H, Args>(self, handler: H) -> Self
    where
        H: Handler<Args>,
        H::Payload: JobOf<Q>,
        H::Output: OutputOf<H::Payload>,
    {
        self.job(<H::Payload as JobType>::NAME, handler)
    }
}

impl<Q> Processor<Q> {
    fn named(queue: String) -> Self {
        Processor {
            queue,
            also: Vec::new(),
            options: WorkerOptions::default(),
            timeout: None,
            handlers: Vec::new(),
            _queue: PhantomData,
        }
    }

    /// Serves `queue` too, with the same handlers and settings and a worker of its own
    /// (one code path for `email` and `email-eu`, say).
    pub fn also_serve(mut self, queue: impl Into<String>) -> Self {
        self.also.push(queue.into());
        self
    }

    /// How many jobs of this queue run at once in this process.
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.options.concurrency = concurrency;
        self
    }

    /// Fail an attempt that runs longer than this; its future is dropped.
    /// A job's own [`JobOptions::timeout`](crate::JobOptions::timeout) wins over it.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// How long a worker's lock on a job lasts between renewals (BullMQ default: 30 s).
    /// Locks are renewed every quarter of it, a failed renewal is tried again soon, and
    /// a lock that expired while Redis was out of reach is taken back if no other worker
    /// took the job. A job whose lock another worker holds (it was recovered as
    /// stalled) is run there; this run is cancelled and reported as
    /// [`WorkerEvent::LockLost`](crate::WorkerEvent::LockLost), never as a failure.
    pub fn lock_duration(mut self, lock_duration: Duration) -> Self {
        self.options.lock_duration = Some(lock_duration);
        self
    }

    /// Start at most `max` jobs per `per` across this queue's workers.
    pub fn limiter(mut self, max: u64, per: Duration) -> Self {
        self.options.limiter = Some((max, per));
        self
    }

    /// Takes this queue's jobs one group after the other
    /// ([`JobOptions::group`](crate::JobOptions::group)), each group under `limits`
    /// across every worker: a group with one waiting job starts within about one turn
    /// of the groups, however deep the others are. Every worker of the queue must be
    /// grouped (a worker that is not takes jobs in BullMQ's order, past the groups).
    ///
    /// ```
    /// use std::time::Duration;
    /// use queue_core::{group::GroupLimits, Job, JobError, Processor};
    ///
    /// async fn render(job: Job<String>) -> Result<(), JobError> { Ok(()) }
    ///
    /// let reports = Processor::new("reports")
    ///     .concurrency(10)
    ///     .groups(GroupLimits::new().concurrency(2).rate(30, Duration::from_secs(60)))
    ///     .job("render", render);
    /// # let _ = reports;
    /// ```
    pub fn groups(mut self, limits: crate::group::GroupLimits) -> Self {
        self.options.groups = Some(limits);
        self
    }

    /// How often this worker looks for stalled jobs: active jobs whose lock expired
    /// because their worker died (BullMQ default: 30 s). A stalled job goes back to
    /// waiting and runs again.
    pub fn stalled_interval(mut self, interval: Duration) -> Self {
        self.options.stalled_interval = Some(interval);
        self
    }

    /// What a job whose name no handler of this queue takes does. By default its attempt
    /// fails as retryable, with the known names in the reason: in a rolling deploy that
    /// updates producers first, a worker that knows the name is on its way, and the
    /// job's retries reach it. `true` fails such a job at once, without retries.
    pub fn fail_unknown_job_names(mut self, fail: bool) -> Self {
        self.options.fail_unknown_names = fail;
        self
    }

    /// How many times a job may stall (its worker died or lost its lock) and still be
    /// run again; one more stall fails it with "job stalled more than allowable limit"
    /// (BullMQ default: 1). Raise it where workers are killed often, such as spot
    /// instances or frequent deploys without a graceful shutdown.
    pub fn max_stalled_count(mut self, count: u32) -> Self {
        self.options.max_stalled_count = Some(count);
        self
    }

    /// Records BullMQ's per-minute metrics in Redis (completed and failed jobs per
    /// minute, `metrics.maxDataPoints` in Node BullMQ), keeping the last `max_data_points`
    /// minutes (BullMQ's suggestion: two weeks, 20,160). Bull Board's and Taskforce's
    /// metrics pages read them. Off by default, as in BullMQ: each finished job then
    /// costs a few more Redis writes inside the same script.
    pub fn per_minute_metrics(mut self, max_data_points: usize) -> Self {
        self.options.metrics_data_points = Some(max_data_points);
        self
    }

    /// How many of the engine worker's events may wait to be read (default 1,024);
    /// past it they are dropped and counted (`queue_worker_events_dropped_total`).
    /// For tests that must see events dropped; not part of the supported API.
    #[doc(hidden)]
    pub fn worker_event_capacity(mut self, capacity: usize) -> Self {
        self.options.event_capacity = Some(capacity);
        self
    }

    /// How long a cancelled handler may run on before its future is dropped (default 5 s).
    pub fn cancel_grace(mut self, grace: Duration) -> Self {
        self.options.cancel_grace = grace;
        self
    }

    /// Handle jobs named `name` with `handler`.
    pub fn job<H: Handler<Args>, Args>(mut self, name: impl Into<String>, handler: H) -> Self {
        let name = name.into();
        self.handlers.push(RegisteredHandler {
            label: format!("{}/{name} ({})", self.queue, std::any::type_name::<H>()),
            job_name: Some(name),
            handler: ErasedHandler::new(handler),
        });
        self
    }

    /// Handle every job name on this queue that no `job(..)` handler claims.
    pub fn any_job<H: Handler<Args>, Args>(mut self, handler: H) -> Self {
        self.handlers.push(RegisteredHandler {
            label: format!("{}/* ({})", self.queue, std::any::type_name::<H>()),
            job_name: None,
            handler: ErasedHandler::new(handler),
        });
        self
    }

    /// Handles this queue's jobs in batches with `handler`: up to `size` jobs a call
    /// (1 to 1,000), or those that arrived within `wait` after the first. Each job
    /// keeps its own lock, attempts, backoff, events and record; the batch handler says
    /// which fail ([`BatchResult`](crate::worker::BatchResult)). [`concurrency`](Self::concurrency)
    /// counts batches, and [`timeout`](Self::timeout) is the batch's. A queue that runs in
    /// batches has this handler only, for every job name.
    ///
    /// ```
    /// use std::time::Duration;
    /// use queue_core::worker::{Batch, BatchResult};
    /// use queue_core::{JobError, Processor};
    ///
    /// async fn insert_rows(batch: Batch<u64>) -> Result<BatchResult, JobError> {
    ///     let rows: Vec<u64> = batch.iter().map(|job| job.data).collect();
    ///     // .. one INSERT for every row ..
    ///     # let _ = rows;
    ///     Ok(BatchResult::new())
    /// }
    ///
    /// let rows = Processor::new("rows")
    ///     .concurrency(2)
    ///     .batch(100, Duration::from_millis(20), insert_rows);
    /// # let _ = rows;
    /// ```
    pub fn batch<H: BatchHandler<Args>, Args>(
        mut self,
        size: usize,
        wait: Duration,
        handler: H,
    ) -> Self {
        self = self.batches(size, wait);
        self.handlers.push(RegisteredHandler {
            label: format!("{}/* (batch, {})", self.queue, std::any::type_name::<H>()),
            job_name: None,
            handler: ErasedHandler::batch(handler),
        });
        self
    }

    /// The queue's batch settings, for a batch handler registered erased (a
    /// `#[processor(.., batch(..))]` record).
    pub(crate) fn batches(mut self, size: usize, wait: Duration) -> Self {
        self.options.batch = Some(Batching {
            size,
            wait,
            timeout: None,
        });
        self
    }

    /// Adds an already erased handler (from a `#[processor]` record).
    pub(crate) fn erased(
        mut self,
        job_name: Option<&str>,
        handler: ErasedHandler,
        label: &str,
    ) -> Self {
        self.handlers.push(RegisteredHandler {
            job_name: job_name.map(str::to_owned),
            handler,
            label: label.to_owned(),
        });
        self
    }

    /// The queue this processor serves (the first, with [`also_serve`](Self::also_serve)).
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// A copy, typed by another queue type.
    fn retyped<R>(&self) -> Processor<R> {
        Processor {
            queue: self.queue.clone(),
            also: self.also.clone(),
            options: self.options.clone(),
            timeout: self.timeout,
            handlers: self.handlers.clone(),
            _queue: PhantomData,
        }
    }

    /// This processor once per queue it serves, its queue's type dropped, each queue
    /// name through `rename` (the app's renames).
    pub(crate) fn per_queue(&self, rename: impl Fn(&str) -> String) -> Vec<Processor> {
        std::iter::once(&self.queue)
            .chain(&self.also)
            .map(|queue| {
                let renamed = rename(queue);
                let mut one = self.retyped::<AnyQueue>();
                for handler in &mut one.handlers {
                    handler.label = handler.label.replacen(&self.queue, &renamed, 1);
                }
                one.queue = renamed;
                one.also = Vec::new();
                one
            })
            .collect()
    }
}
