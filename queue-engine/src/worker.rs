use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::ext::event_channel::EventSender;
use crate::ext::failure_record::failure_fields;
use tokio::sync::{broadcast, Mutex, Notify, RwLock};
use tokio::task::JoinHandle;
use tracing::{debug, error, info, warn};
use uuid::Uuid;

use crate::error::Error;
use crate::job::Job;
use crate::keys::{validate_prefix, validate_queue_name, QueueKeys};
use crate::options::{JobOptions, WorkerOptions};
use crate::redis_connection::{BlockingRedisConnection, RedisConnection};
use crate::types::RemoveOnFinish;

/// Type alias for the processor function.
///
/// The processor receives a reference to the job and a cancellation token,
/// and returns a future that resolves to either the return value or an error.
pub type ProcessorFn = Arc<
    dyn Fn(
            Job,
            CancellationToken,
        ) -> Pin<Box<dyn Future<Output = Result<serde_json::Value, Error>> + Send>>
        + Send
        + Sync,
>;

/// Conversion into a boxed [`ProcessorFn`].
///
/// This lets [`Worker::new`] / [`Worker::with_options`] accept either a plain
/// async closure `Fn(Job, CancellationToken) -> impl Future<Output =
/// Result<serde_json::Value, Error>>` (the ergonomic form) or an already-boxed
/// [`ProcessorFn`].
pub trait IntoProcessor {
    /// Convert `self` into a boxed processor function.
    fn into_processor(self) -> ProcessorFn;
}

impl<F, Fut> IntoProcessor for F
where
    F: Fn(Job, CancellationToken) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<serde_json::Value, Error>> + Send + 'static,
{
    fn into_processor(self) -> ProcessorFn {
        Arc::new(move |job, token| Box::pin(self(job, token)))
    }
}

impl IntoProcessor for ProcessorFn {
    fn into_processor(self) -> ProcessorFn {
        self
    }
}

/// A token that signals whether a job has been cancelled.
#[derive(Debug, Clone)]
pub struct CancellationToken {
    cancelled: Arc<AtomicBool>,
    notify: Arc<Notify>,
}

impl CancellationToken {
    /// Create a new active (non-cancelled) token.
    pub fn new() -> Self {
        Self {
            cancelled: Arc::new(AtomicBool::new(false)),
            notify: Arc::new(Notify::new()),
        }
    }

    /// Check if cancellation has been requested.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// Cancel the token, notifying all waiters.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Wait until cancellation is requested.
    pub async fn cancelled(&self) {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();

        if self.is_cancelled() {
            return;
        }

        notified.await;
    }
}

impl Default for CancellationToken {
    fn default() -> Self {
        Self::new()
    }
}

/// Events emitted by the Worker.
#[derive(Debug, Clone)]
pub enum WorkerEvent {
    /// A job has been completed successfully.
    Completed {
        /// The job ID.
        job_id: String,
        /// The return value from the processor.
        result: serde_json::Value,
    },
    /// A job has failed.
    Failed {
        /// The job ID.
        job_id: String,
        /// The error message.
        error: String,
    },
    /// An error occurred in the worker.
    Error(String),
    /// The worker has become idle (no jobs to process).
    Drained,
    /// The worker is ready to process jobs.
    Ready,
    /// The worker has been closed.
    Closed,
    /// A stalled job was detected.
    Stalled {
        /// The stalled job ID.
        job_id: String,
    },
    /// A job has started processing.
    Active {
        /// The job ID that became active.
        job_id: String,
    },
    /// Job progress was updated.
    Progress {
        /// The job ID.
        job_id: String,
        /// The updated progress value.
        progress: crate::types::JobProgress,
    },
    /// The worker was paused.
    Paused,
    /// The worker was resumed.
    Resumed,
}

/// A Worker processes jobs from a queue.
///
/// The worker fetches jobs, manages locks, handles retries and stalled job detection.
///
/// # Example
///
/// ```rust,no_run
/// use bullmq::{Worker, Job};
///
/// # async fn example() -> bullmq::Result<()> {
/// let worker = Worker::new(
///     "my-queue",
///     |job: Job, _token| Box::pin(async move {
///         println!("Processing: {}", job.name());
///         Ok(serde_json::Value::Null)
///     }),
/// ).await?;
/// # Ok(())
/// # }
/// ```
pub struct Worker {
    keys: QueueKeys,
    opts: WorkerOptions,
    id: String,
    conn: RedisConnection,
    blocking_conn: BlockingRedisConnection,
    processor: ProcessorFn,
    running: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    closing: Arc<AtomicBool>,
    event_tx: EventSender<WorkerEvent>,
    event_rx: Arc<Mutex<crate::ext::event_channel::EventReceiver<WorkerEvent>>>,
    active_jobs: Arc<RwLock<Vec<ActiveJob>>>,
    main_loop_handle: Mutex<Option<JoinHandle<()>>>,
    stalled_check_handle: Mutex<Option<JoinHandle<()>>>,
    lock_renew_handle: Mutex<Option<JoinHandle<()>>>,
    progress_tx: broadcast::Sender<crate::job::JobProgressEvent>,
    /// Dynamic concurrency: the desired number of concurrent workers.
    desired_concurrency: Arc<AtomicUsize>,
    /// Dynamic concurrency: gate for workers waiting for a slot.
    concurrency_gate: Arc<Notify>,
    /// Dynamic concurrency: count of workers currently in the fetch-process phase.
    active_fetchers: Arc<AtomicUsize>,
}

/// Tracks an active job being processed.
struct ActiveJob {
    job_id: String,
    token: String,
    cancel_token: CancellationToken,
}

/// Batches (change 36): a batch's take, run and finish, a child of this module.
#[path = "ext/batch_worker.rs"]
mod batch;

/// Result from a moveToActive attempt.
enum FetchResult {
    /// A batch worker's jobs (change 36), one or more.
    Batch(Vec<batch::TakenJob>),
    /// A job is ready for processing.
    Job(Box<Job>),
    /// No job ready, but there's a delayed job at this timestamp (ms).
    NextTimestamp(u64),
    /// Queue is completely empty (no waiting or delayed jobs).
    Empty,
    /// Rate limited — the value is the TTL in ms until the limit expires.
    RateLimited(u64),
}

fn should_convert_discarded_error(error: &Error) -> bool {
    !matches!(
        error,
        Error::Unrecoverable(_)
            | Error::Delayed
            | Error::WaitingChildren
            | Error::RateLimited { .. }
            | Error::JobLockNotExist(_)
    )
}

fn processing_drained(active_job_count: usize, active_fetchers: usize) -> bool {
    active_job_count == 0 && active_fetchers == 0
}

/// Shared context for all worker loops within a single Worker instance.
///
/// Pre-computes keys and holds all shared state needed by the processing loops,
/// avoiding excessive cloning and keeping the loop body focused on logic.
struct LoopContext {
    conn: RedisConnection,
    keys: QueueKeys,
    opts: WorkerOptions,
    processor: ProcessorFn,
    progress_tx: broadcast::Sender<crate::job::JobProgressEvent>,
    paused: Arc<AtomicBool>,
    closing: Arc<AtomicBool>,
    active_jobs: Arc<RwLock<Vec<ActiveJob>>>,
    event_tx: EventSender<WorkerEvent>,
    desired_concurrency: Arc<AtomicUsize>,
    concurrency_gate: Arc<Notify>,
    active_fetchers: Arc<AtomicUsize>,
    // Pre-computed keys (avoid re-generating on every call)
    move_to_active_keys: Vec<String>,
    move_to_finished_base_keys: Vec<String>,
    completed_key: String,
    failed_key: String,
    metrics_completed_key: String,
    metrics_failed_key: String,
    marker_key: String,
    prefix_bytes: Vec<u8>,
    /// Set when jobs are taken one group after the other (`WorkerOptions::groups`).
    groups: Option<crate::ext::groups::Grouping>,

    // Token generation
    worker_id: String,
    token_counter: std::sync::atomic::AtomicU64,
    /// Whether the loops are without Redis: said once, not on every retry.
    outage: crate::ext::outage::Outage,
    /// Where the processor runs: in the slot's task, or in one of its own.
    placement: crate::ext::processor_task::ProcessorPlacement,
}

/// One attempt's move to a finished set, for [`Worker::finish`]: `target` is
/// `"completed"` (with the return value) or `"failed"` (with the reason).
struct Finish<'a> {
    job_id: &'a str,
    token: &'a str,
    value: &'a serde_json::Value,
    /// The msgpacked fields `moveToFinished` also writes (a failure's record).
    fields: &'a [u8],
    job_attempts: u32,
    job_opts: &'a JobOptions,
    target: &'static str,
    fetch_next: bool,
}

/// RAII guard for an acquired concurrency slot.
///
/// Ensures the slot is always released when dropped, including on panic.
struct ConcurrencySlotGuard {
    ctx: Arc<LoopContext>,
}

impl ConcurrencySlotGuard {
    fn new(ctx: Arc<LoopContext>) -> Self {
        Self { ctx }
    }
}

impl Drop for ConcurrencySlotGuard {
    fn drop(&mut self) {
        Worker::release_concurrency_slot(&self.ctx);
    }
}

impl LoopContext {
    #[allow(clippy::too_many_arguments)]
    fn new(
        conn: RedisConnection,
        keys: QueueKeys,
        opts: WorkerOptions,
        worker_id: String,
        processor: ProcessorFn,
        progress_tx: broadcast::Sender<crate::job::JobProgressEvent>,
        paused: Arc<AtomicBool>,
        closing: Arc<AtomicBool>,
        active_jobs: Arc<RwLock<Vec<ActiveJob>>>,
        event_tx: EventSender<WorkerEvent>,
        desired_concurrency: Arc<AtomicUsize>,
        concurrency_gate: Arc<Notify>,
        active_fetchers: Arc<AtomicUsize>,
    ) -> Self {
        let move_to_active_keys = vec![
            keys.wait(),
            keys.active(),
            keys.prioritized(),
            keys.events(),
            keys.stalled(),
            keys.limiter(),
            keys.delayed(),
            keys.paused(),
            keys.meta(),
            keys.pc(),
            keys.marker(),
        ];
        let move_to_finished_base_keys = vec![
            keys.wait(),
            keys.active(),
            keys.prioritized(),
            keys.events(),
            keys.stalled(),
            keys.limiter(),
            keys.delayed(),
            keys.paused(),
            keys.meta(),
            keys.pc(),
        ];
        let completed_key = keys.completed();
        let failed_key = keys.failed();
        let metrics_completed_key = keys.get("metrics:completed");
        let metrics_failed_key = keys.get("metrics:failed");
        let marker_key = keys.marker();
        let prefix_bytes = keys.key_prefix().into_bytes();
        let groups = opts
            .groups
            .map(|limits| crate::ext::groups::Grouping::new(&keys, &move_to_active_keys, limits));

        Self {
            conn,
            keys,
            opts,
            processor,
            progress_tx,
            paused,
            closing,
            active_jobs,
            event_tx,
            desired_concurrency,
            concurrency_gate,
            active_fetchers,
            move_to_active_keys,
            move_to_finished_base_keys,
            completed_key,
            failed_key,
            metrics_completed_key,
            metrics_failed_key,
            marker_key,
            prefix_bytes,
            groups,
            worker_id,
            token_counter: std::sync::atomic::AtomicU64::new(0),
            outage: crate::ext::outage::Outage::default(),
            placement: crate::ext::processor_task::ProcessorPlacement::for_current_runtime(),
        }
    }

    /// Generate a unique token for a job fetch.
    fn next_token(&self) -> String {
        let seq = self.token_counter.fetch_add(1, Ordering::Relaxed);
        format!("{}:{}", self.worker_id, seq)
    }
}

fn pack_move_to_active_opts(token: &str, opts: &WorkerOptions) -> Vec<u8> {
    use rmp::encode::*;

    let mut len = 2;
    if opts.name.is_some() {
        len += 1;
    }
    if opts.limiter.is_some() {
        len += 1;
    }

    let mut buf = Vec::with_capacity(96);
    write_map_len(&mut buf, len).unwrap();
    write_str(&mut buf, "token").unwrap();
    write_str(&mut buf, token).unwrap();
    write_str(&mut buf, "lockDuration").unwrap();
    write_uint(&mut buf, opts.lock_duration).unwrap();

    if let Some(name) = opts.name.as_deref() {
        write_str(&mut buf, "name").unwrap();
        write_str(&mut buf, name).unwrap();
    }

    if let Some(ref limiter) = opts.limiter {
        write_str(&mut buf, "limiter").unwrap();
        // Encode limiter as a sub-map {max, duration}
        write_map_len(&mut buf, 2).unwrap();
        write_str(&mut buf, "max").unwrap();
        write_uint(&mut buf, limiter.max).unwrap();
        write_str(&mut buf, "duration").unwrap();
        write_uint(&mut buf, limiter.duration).unwrap();
    }

    buf
}

/// Map a negative status code returned by `moveToFinished` / `moveToCompleted`
/// to a descriptive error, mirroring Node.js `Scripts.finishedErrors`.
///
/// `command` is the name of the Lua command (e.g. "moveToFinished") and `state`
/// is the previous job state (used for the not-in-state / lock-mismatch cases).
fn finished_error(code: i64, job_id: &str, command: &str, state: &str) -> Error {
    match code {
        -1 => Error::ProcessingError(format!("Missing key for job {}. {}", job_id, command)),
        -2 => Error::ProcessingError(format!("Missing lock for job {}. {}", job_id, command)),
        -3 => Error::ProcessingError(format!(
            "Job {} is not in the {} state. {}",
            job_id, state, command
        )),
        -4 => Error::ProcessingError(format!(
            "Job {} has pending dependencies. {}",
            job_id, command
        )),
        -6 => Error::ProcessingError(format!(
            "Lock mismatch for job {}. Cmd {} from {}",
            job_id, command, state
        )),
        -9 => Error::Unrecoverable(format!(
            "Cannot complete job {} because it has at least one failed child. {}",
            job_id, command
        )),
        _ => Error::from_script_code(code),
    }
}

fn pack_move_to_finished_opts(
    token: &str,
    opts: &WorkerOptions,
    job_opts: &JobOptions,
    attempts: u32,
    target: &str,
) -> Vec<u8> {
    use rmp::encode::*;

    let mut len = 9;
    if opts.name.is_some() {
        len += 1;
    }
    if opts.limiter.is_some() {
        len += 1;
    }

    let mut buf = Vec::with_capacity(160);
    write_map_len(&mut buf, len).unwrap();

    write_str(&mut buf, "token").unwrap();
    write_str(&mut buf, token).unwrap();

    write_str(&mut buf, "keepJobs").unwrap();
    // Job-level options take priority over worker-level options
    let keep_policy = if target == "completed" {
        job_opts
            .remove_on_complete
            .as_ref()
            .or(opts.remove_on_complete.as_ref())
    } else {
        job_opts
            .remove_on_fail
            .as_ref()
            .or(opts.remove_on_fail.as_ref())
    };
    write_keep_jobs(&mut buf, keep_policy);

    write_str(&mut buf, "lockDuration").unwrap();
    write_uint(&mut buf, opts.lock_duration).unwrap();

    write_str(&mut buf, "attempts").unwrap();
    write_uint(&mut buf, attempts as u64).unwrap();

    write_str(&mut buf, "maxMetricsSize").unwrap();
    // When metrics are enabled, this is the max number of data points to keep.
    // An empty string disables metrics collection in the Lua script.
    match opts.metrics.as_ref() {
        Some(m) => write_str(&mut buf, &m.max_data_points.to_string()).unwrap(),
        None => write_str(&mut buf, "").unwrap(),
    }

    for key in ["fpof", "cpof", "idof", "rdof"] {
        write_str(&mut buf, key).unwrap();
        write_bool(&mut buf, false).unwrap();
    }

    if let Some(name) = opts.name.as_deref() {
        write_str(&mut buf, "name").unwrap();
        write_str(&mut buf, name).unwrap();
    }

    // Include the limiter so that, when the script fetches the next job in the
    // same round-trip (`fetchNext`), rate limiting is still honoured. Mirrors
    // the Node.js `moveToFinishedArgs` opts (`limiter: opts.limiter`).
    if let Some(ref limiter) = opts.limiter {
        write_str(&mut buf, "limiter").unwrap();
        write_map_len(&mut buf, 2).unwrap();
        write_str(&mut buf, "max").unwrap();
        write_uint(&mut buf, limiter.max).unwrap();
        write_str(&mut buf, "duration").unwrap();
        write_uint(&mut buf, limiter.duration).unwrap();
    }

    buf
}

fn write_keep_jobs(buf: &mut Vec<u8>, policy: Option<&RemoveOnFinish>) {
    use rmp::encode::*;

    match policy {
        Some(RemoveOnFinish::Bool(true)) => {
            write_map_len(buf, 1).unwrap();
            write_str(buf, "count").unwrap();
            write_sint(buf, 0).unwrap();
        }
        Some(RemoveOnFinish::Bool(false)) | None => {
            write_map_len(buf, 1).unwrap();
            write_str(buf, "count").unwrap();
            write_sint(buf, -1).unwrap();
        }
        Some(RemoveOnFinish::Count(count)) => {
            write_map_len(buf, 1).unwrap();
            write_str(buf, "count").unwrap();
            write_uint(buf, *count as u64).unwrap();
        }
        Some(RemoveOnFinish::Options(keep_jobs)) => {
            let len = keep_jobs.age.is_some() as u32
                + keep_jobs.count.is_some() as u32
                + keep_jobs.limit.is_some() as u32;
            write_map_len(buf, len).unwrap();
            if let Some(age) = keep_jobs.age {
                write_str(buf, "age").unwrap();
                write_uint(buf, age).unwrap();
            }
            if let Some(count) = keep_jobs.count {
                write_str(buf, "count").unwrap();
                write_uint(buf, count as u64).unwrap();
            }
            if let Some(limit) = keep_jobs.limit {
                write_str(buf, "limit").unwrap();
                write_uint(buf, limit as u64).unwrap();
            }
        }
    }
}

impl Worker {
    /// Create a new Worker with default options and start processing jobs.
    ///
    /// Uses a default Redis connection (`redis://127.0.0.1:6379`) and the `bull`
    /// key prefix. Use [`Worker::with_options`] to customize.
    ///
    /// The `processor` may be any async closure. Annotate the first parameter
    /// as [`Job`] so its type can be inferred:
    ///
    /// ```no_run
    /// # async fn demo() -> bullmq::Result<()> {
    /// use bullmq::{Job, Worker};
    /// let worker = Worker::new("emails", |job: Job, _token| async move {
    ///     println!("processing {}", job.id());
    ///     Ok(serde_json::Value::Null)
    /// })
    /// .await?;
    /// # let _ = worker; Ok(()) }
    /// ```
    pub async fn new<P: IntoProcessor>(queue_name: &str, processor: P) -> Result<Self, Error> {
        Self::with_options(queue_name, processor, WorkerOptions::default()).await
    }

    /// Create a new Worker with explicit options and start processing jobs.
    ///
    /// The `processor` may be any async closure `Fn(Job, CancellationToken) ->
    /// impl Future<Output = Result<serde_json::Value, Error>>`. A pre-boxed
    /// [`ProcessorFn`] is also accepted, so existing call sites keep working.
    pub async fn with_options<P: IntoProcessor>(
        queue_name: &str,
        processor: P,
        opts: WorkerOptions,
    ) -> Result<Self, Error> {
        let processor: ProcessorFn = processor.into_processor();

        validate_queue_name(queue_name)?;
        validate_prefix(&opts.prefix)?;

        // Validate options
        if opts.concurrency == 0 {
            return Err(Error::InvalidConfig(
                "concurrency must be a finite number greater than 0".to_string(),
            ));
        }
        if opts.stalled_interval == 0 {
            return Err(Error::InvalidConfig(
                "stalledInterval must be greater than 0".to_string(),
            ));
        }
        if opts.drain_delay == 0 {
            return Err(Error::InvalidConfig(
                "drainDelay must be greater than 0".to_string(),
            ));
        }
        if let Some(batch) = &opts.batch {
            batch.check(opts.groups.is_some(), opts.lock_duration)?;
        }

        let conn = RedisConnection::new_managed_only(&opts.connection).await?;
        let blocking_conn = BlockingRedisConnection::new_managed(&conn).await?;
        let keys = QueueKeys::new(queue_name, Some(&opts.prefix));

        // Register the blocking connection's client name so that
        // `Queue::get_workers` can discover this worker via `CLIENT LIST`.
        // Best-effort: some managed Redis providers reject `CLIENT SETNAME`.
        let client_name_suffix = opts
            .name
            .as_deref()
            .map(|n| format!(":w:{n}"))
            .unwrap_or_default();
        let _ = blocking_conn
            .managed_set_name(&keys.client_name(&client_name_suffix))
            .await;

        let id = Uuid::new_v4().to_string();
        let (event_tx, event_rx) = crate::ext::event_channel::channel(opts.event_capacity);
        let (progress_tx, _) = broadcast::channel(128);

        let worker = Self {
            keys,
            opts: opts.clone(),
            id,
            conn,
            blocking_conn,
            processor,
            running: Arc::new(AtomicBool::new(false)),
            paused: Arc::new(AtomicBool::new(false)),
            closing: Arc::new(AtomicBool::new(false)),
            event_tx,
            event_rx: Arc::new(Mutex::new(event_rx)),
            active_jobs: Arc::new(RwLock::new(Vec::new())),
            main_loop_handle: Mutex::new(None),
            stalled_check_handle: Mutex::new(None),
            lock_renew_handle: Mutex::new(None),
            progress_tx,
            desired_concurrency: Arc::new(AtomicUsize::new(opts.concurrency)),
            concurrency_gate: Arc::new(Notify::new()),
            active_fetchers: Arc::new(AtomicUsize::new(0)),
        };

        if opts.autorun {
            worker.run().await?;
        }

        Ok(worker)
    }

    /// The worker's unique ID.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The worker's concurrency setting.
    pub fn concurrency(&self) -> usize {
        self.desired_concurrency.load(Ordering::Relaxed)
    }

    /// Dynamically change the worker's concurrency.
    ///
    /// Updates the target number of concurrent fetchers for running worker loops.
    /// Existing loops are woken to re-check the concurrency gate.
    pub fn set_concurrency(&self, concurrency: usize) {
        if concurrency == 0 {
            return;
        }
        let old = self.desired_concurrency.swap(concurrency, Ordering::SeqCst);
        if concurrency > old {
            // Wake up any workers waiting at the gate
            self.concurrency_gate.notify_waiters();
        }
    }

    /// Whether the worker is currently running.
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Relaxed)
    }

    /// Whether the worker is paused.
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    /// Number of currently active jobs.
    pub async fn active_count(&self) -> usize {
        self.active_jobs.read().await.len()
    }

    /// How many events were dropped because nobody read them fast enough: always
    /// `0` unless [`WorkerOptions::event_capacity`] bounds the channel.
    pub fn dropped_events(&self) -> u64 {
        self.event_tx.dropped()
    }

    /// Completes once the events waiting to be read fill a quarter of a bounded
    /// channel ([`WorkerOptions::event_capacity`]), at once if they did since the last
    /// call; never when the channel is unbounded. A reader that drains the channel in
    /// batches on a timer waits on this beside its timer, so a burst of events wakes it
    /// before the channel overflows.
    pub async fn events_filling(&self) {
        self.event_tx.filling().await
    }

    /// Receive the next worker event.
    pub async fn next_event(&self) -> Option<WorkerEvent> {
        self.event_rx.lock().await.recv().await
    }

    /// Start processing jobs.
    pub async fn run(&self) -> Result<(), Error> {
        if self.running.load(Ordering::Relaxed) {
            return Err(Error::InvalidConfig(
                "Worker is already running".to_string(),
            ));
        }

        self.running.store(true, Ordering::Release);
        let _ = self.event_tx.send(WorkerEvent::Ready);

        self.start_progress_forwarder().await;
        if !self.opts.skip_stalled_check {
            self.start_stalled_check().await;
        }
        if !self.opts.skip_lock_renewal {
            self.start_lock_renewal().await;
        }
        self.start_main_loop().await;

        Ok(())
    }

    /// Pause the worker (finish active jobs but don't fetch new ones).
    pub fn pause(&self) {
        self.paused.store(true, Ordering::Release);
        let _ = self.event_tx.send(WorkerEvent::Paused);
    }

    /// Resume the worker.
    pub fn resume(&self) {
        self.paused.store(false, Ordering::Release);
        let _ = self.event_tx.send(WorkerEvent::Resumed);
    }

    /// Cancel a specific active job.
    pub async fn cancel_job(&self, job_id: &str) -> bool {
        let jobs = self.active_jobs.read().await;
        if let Some(active) = jobs.iter().find(|j| j.job_id == job_id) {
            active.cancel_token.cancel();
            true
        } else {
            false
        }
    }

    /// Cancel all active jobs.
    pub async fn cancel_all_jobs(&self) {
        let jobs = self.active_jobs.read().await;
        for active in jobs.iter() {
            active.cancel_token.cancel();
        }
    }

    /// Close the worker gracefully.
    ///
    /// Waits for active jobs to complete (up to `timeout` milliseconds).
    pub async fn close(&self, timeout_ms: u64) -> Result<(), Error> {
        self.closing.store(true, Ordering::Release);
        self.running.store(false, Ordering::Release);
        // Wake any workers waiting at the concurrency gate so they can exit
        self.concurrency_gate.notify_waiters();

        // Wait for active jobs to drain
        let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms);
        loop {
            let active_job_count = self.active_jobs.read().await.len();
            let active_fetchers = self.active_fetchers.load(Ordering::SeqCst);
            if processing_drained(active_job_count, active_fetchers) {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                warn!(
                    active_job_count,
                    active_fetchers, "close timeout reached with active work remaining"
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        // Let the main loop finish naturally so any in-flight processing tasks
        // tracked by its JoinSet can complete and persist final job state.
        if let Some(mut handle) = self.main_loop_handle.lock().await.take() {
            let now = tokio::time::Instant::now();
            if now < deadline {
                let remaining = deadline - now;
                if tokio::time::timeout(remaining, &mut handle).await.is_err() {
                    warn!("close timeout reached while waiting for main loop");
                    handle.abort();
                }
            } else {
                handle.abort();
            }
        }
        // Cancel remaining background tasks.
        if let Some(handle) = self.stalled_check_handle.lock().await.take() {
            handle.abort();
        }
        if let Some(handle) = self.lock_renew_handle.lock().await.take() {
            handle.abort();
        }

        let _ = self.event_tx.send(WorkerEvent::Closed);
        self.conn.close().await;

        debug!("worker closed");
        Ok(())
    }

    /// Manually fetch the next job (blocking — waits for a job to become available).
    pub async fn get_next_job(&self, token: &str) -> Result<Option<Job>, Error> {
        if self.paused.load(Ordering::Acquire) {
            return Ok(None);
        }
        let mut job = self.fetch_next_job(token, true).await?;
        if let Some(ref mut j) = job {
            j.set_context(crate::job::ScriptContext {
                conn: self.conn.clone(),
                keys: self.keys.clone(),
                progress_tx: self.progress_tx.clone(),
                token: token.to_string(),
                lock_duration: self.opts.lock_duration,
            });
            let _ = self.event_tx.send(WorkerEvent::Active {
                job_id: j.id().to_string(),
            });
        }
        Ok(job)
    }

    /// Manually fetch the next job (non-blocking — returns None immediately if no job available).
    pub async fn get_next_job_nonblocking(&self, token: &str) -> Result<Option<Job>, Error> {
        if self.paused.load(Ordering::Acquire) {
            return Ok(None);
        }
        let mut job = self.fetch_next_job(token, false).await?;
        if let Some(ref mut j) = job {
            j.set_context(crate::job::ScriptContext {
                conn: self.conn.clone(),
                keys: self.keys.clone(),
                progress_tx: self.progress_tx.clone(),
                token: token.to_string(),
                lock_duration: self.opts.lock_duration,
            });
            let _ = self.event_tx.send(WorkerEvent::Active {
                job_id: j.id().to_string(),
            });
        }
        Ok(job)
    }

    // ── Private: Main Loop ───────────────────────────────────────────────

    async fn start_main_loop(&self) {
        let ctx = Arc::new(LoopContext::new(
            self.conn.clone(),
            self.keys.clone(),
            self.opts.clone(),
            self.id.clone(),
            self.processor.clone(),
            self.progress_tx.clone(),
            self.paused.clone(),
            self.closing.clone(),
            self.active_jobs.clone(),
            self.event_tx.clone(),
            self.desired_concurrency.clone(),
            self.concurrency_gate.clone(),
            self.active_fetchers.clone(),
        ));

        let blocking_conn = self.blocking_conn.clone();

        // A single fetch-driver owns all blocking reads and job dispatch,
        // mirroring the Node.js `mainLoop`. It fetches at most one job at a time
        // (issuing at most one blocking `BZPOPMIN` when the queue is empty) and
        // dispatches each fetched job to its own processing task, so up to
        // `concurrency` jobs run in parallel — without a job arrival waking many
        // idle fetch loops at once (the "thundering herd" the previous N-loop +
        // notify_waiters design reintroduced, which Node deliberately avoids).
        let handle = tokio::spawn(Self::run_main_driver(ctx, blocking_conn));

        *self.main_loop_handle.lock().await = Some(handle);
    }

    /// The single fetch-and-dispatch driver. Runs until `closing` is set.
    ///
    /// Fetches at most one job at a time. When the queue is empty (or waiting on
    /// a delayed job / rate limit) it issues a single blocking `BZPOPMIN` on the
    /// marker key and parks until a marker arrives or the timeout elapses — so
    /// exactly one blocking command is ever in flight regardless of
    /// `concurrency`. Each fetched job is dispatched to its own task, bounded by
    /// the concurrency gate, giving parallel processing without waking many idle
    /// fetchers per job. This mirrors the Node.js single-driver `mainLoop`.
    async fn run_main_driver(ctx: Arc<LoopContext>, blocking_conn: BlockingRedisConnection) {
        // Tokens of fetches that got no answer from Redis: they may have been carried
        // out, their job left active under the token (`resume_unanswered_fetches`).
        let mut unanswered_fetches: Vec<String> = Vec::new();
        loop {
            if ctx.closing.load(Ordering::Relaxed) {
                break;
            }

            if !unanswered_fetches.is_empty() {
                Self::resume_unanswered_fetches(&ctx, &mut unanswered_fetches).await;
            }

            if ctx.paused.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }

            // Bound in-flight processing to the concurrency limit *before*
            // fetching, so we never fetch a job we cannot immediately process.
            // Blocks on the concurrency gate while all slots are busy.
            if !Self::acquire_concurrency_slot(&ctx).await {
                // Closing was requested while we were waiting for a slot.
                // Loop back so the closing branch can drain in-flight tasks.
                continue;
            }
            let slot_guard = ConcurrencySlotGuard::new(ctx.clone());

            // `acquire_concurrency_slot` can block while all slots are busy, so
            // re-check state after it returns: the worker may have been closed or
            // paused (and new jobs enqueued) while we waited. Without this we
            // could fetch a job right after being paused.
            if ctx.closing.load(Ordering::Relaxed) {
                break;
            }
            if ctx.paused.load(Ordering::Relaxed) {
                drop(slot_guard);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }

            let token = ctx.next_token();

            // Non-blocking fetch (moveToActive script only, or groupTake, or a batch).
            let fetch_result = match (ctx.groups.as_ref(), ctx.opts.batch.as_ref()) {
                (Some(groups), _) => Self::take_grouped(&ctx, groups, &token).await,
                (None, Some(options)) => batch::take(&ctx, options, &blocking_conn, &token).await,
                (None, None) => {
                    Self::try_fetch_job_fast(
                        &ctx.conn,
                        &ctx.move_to_active_keys,
                        &ctx.prefix_bytes,
                        &token,
                        &ctx.opts,
                    )
                    .await
                }
            };

            if fetch_result.is_ok() {
                ctx.outage.answered(ctx.keys.name());
            }
            match fetch_result {
                Ok(FetchResult::Job(job)) => {
                    Self::spawn_processing(&ctx, slot_guard, *job, token);
                }
                Ok(FetchResult::Batch(jobs)) => batch::spawn(&ctx, slot_guard, jobs, token),
                Ok(FetchResult::NextTimestamp(next_ts)) => {
                    drop(slot_guard);
                    // No job ready, but there's a delayed job coming. Block on the
                    // marker until it is promoted or the delay elapses.
                    let now = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .unwrap()
                        .as_millis() as u64;
                    if next_ts > now {
                        // Cap the wait to periodically re-check `closing`.
                        let delay_ms = (next_ts - now).min(5_000);
                        Self::wait_for_marker(&blocking_conn, &ctx, delay_ms).await;
                    }
                }
                Ok(FetchResult::RateLimited(ttl_ms)) => {
                    drop(slot_guard);
                    // Rate limited — wait for the TTL (capped by maximumRateLimitDelay).
                    let delay_ms = ttl_ms.min(ctx.opts.maximum_rate_limit_delay);
                    Self::wait_for_marker(&blocking_conn, &ctx, delay_ms).await;
                }
                Ok(FetchResult::Empty) => {
                    drop(slot_guard);
                    let _ = ctx.event_tx.send(WorkerEvent::Drained);
                    // The queue is empty: park on the single blocking BZPOPMIN
                    // until a job's marker arrives or drain_delay elapses.
                    Self::wait_for_marker(
                        &blocking_conn,
                        &ctx,
                        ctx.opts.drain_delay.saturating_mul(1000),
                    )
                    .await;
                }
                Err(e) => {
                    drop(slot_guard);
                    if crate::ext::finishing::is_transient(&e) {
                        // A bounded list: an outage adds one a second.
                        if unanswered_fetches.len() >= crate::ext::finishing::MAX_UNANSWERED_FETCHES
                        {
                            unanswered_fetches.remove(0);
                        }
                        unanswered_fetches.push(token);
                    }
                    // The connection auto-reconnects in the background, so keep
                    // looping: once it is re-established the next fetch
                    // succeeds. Log as well as emit the event, otherwise a
                    // worker with no `WorkerEvent` subscriber looks like it
                    // stopped for no reason.
                    ctx.outage
                        .failed(ctx.keys.name(), "failed to fetch a job", &e);
                    let _ = ctx.event_tx.send(WorkerEvent::Error(e.to_string()));
                    tokio::time::sleep(Duration::from_millis(ctx.opts.run_retry_delay)).await;
                }
            };
        }
    }

    /// Dispatch processing to its own task, moving the concurrency slot into it
    /// (released only when the task — including any finish-script chained jobs —
    /// completes). The driver loops immediately to fetch the next job, so fetching
    /// stays single-threaded while processing runs in parallel.
    fn spawn_processing(
        ctx: &Arc<LoopContext>,
        slot_guard: ConcurrencySlotGuard,
        job: Job,
        token: String,
    ) {
        let task_ctx = ctx.clone();
        tokio::spawn(async move {
            let _slot = slot_guard;
            let mut next = Some(job);
            while let Some(current) = next.take() {
                next = Self::process_fetched_job(&task_ctx, current, &token).await;
            }
        });
    }

    /// A fetch whose answer was lost (the connection dropped) may still have been
    /// carried out: its job is then `active` under the fetch's token, and nobody
    /// would run it until its lock expired and stalled-job recovery moved it back (a
    /// minute with the defaults). Once Redis answers, such jobs are found by their
    /// token and processed, as the fetch would have had them.
    async fn resume_unanswered_fetches(ctx: &Arc<LoopContext>, tokens: &mut Vec<String>) {
        let found = match crate::ext::locks::jobs_locked_by(&ctx.conn, &ctx.keys, tokens).await {
            Ok(found) => found,
            // Still out of reach: the next turn of the loop tries again.
            Err(e) if crate::ext::finishing::is_transient(&e) => return,
            Err(e) => {
                warn!(error = %e, "cannot look for jobs taken by fetches whose answer was lost");
                tokens.clear();
                return;
            }
        };
        tokens.clear();
        if ctx.opts.batch.is_some() {
            // A batch's take locked its jobs under one token: they run as that batch.
            return batch::resume(ctx, found).await;
        }
        for (job_id, token) in found {
            let job = match Job::from_id(&ctx.conn, &ctx.keys, &job_id).await {
                Ok(Some(job)) => job,
                Ok(None) => continue,
                Err(e) => {
                    warn!(job_id = %job_id, error = %e, "cannot read a job taken by a fetch whose answer was lost; stalled-job recovery will run it");
                    continue;
                }
            };
            if !Self::acquire_concurrency_slot(ctx).await {
                break;
            }
            let slot_guard = ConcurrencySlotGuard::new(ctx.clone());
            info!(job_id = %job_id, "a fetch whose answer was lost had taken this job; processing it");
            Self::spawn_processing(ctx, slot_guard, job, token);
        }
    }

    /// Block on the marker key until a job/marker arrives or `timeout_ms`
    /// elapses. This is the worker's only blocking Redis command; it replaces
    /// the previous shared watcher + `Notify` fan-out. The response timeout is
    /// disabled on the blocking connection (see [`BlockingRedisConnection::new`])
    /// so the command is allowed to block for its full duration.
    async fn wait_for_marker(
        blocking_conn: &BlockingRedisConnection,
        ctx: &LoopContext,
        timeout_ms: u64,
    ) {
        // BZPOPMIN takes a timeout in (fractional) seconds. Guard against a zero
        // timeout, which Redis interprets as "block forever".
        let timeout_secs = (timeout_ms.max(1) as f64) / 1000.0;
        let waited = blocking_conn
            .managed_bzpopmin(&ctx.marker_key, timeout_secs)
            .await;
        if waited.is_ok() {
            ctx.outage.answered(ctx.keys.name());
        }
        if let Err(e) = waited {
            // Transient error (e.g. connection reset): back off briefly before
            // the driver loops and retries, unless we are shutting down. The
            // blocking connection reconnects in the background, so the retry
            // lands on a healthy socket.
            if !ctx.closing.load(Ordering::Relaxed) {
                ctx.outage
                    .failed(ctx.keys.name(), "the blocking wait failed", &e);
                let _ = ctx.event_tx.send(WorkerEvent::Error(e.to_string()));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    /// Wait until a concurrency slot is available. Returns false if closing.
    async fn acquire_concurrency_slot(ctx: &LoopContext) -> bool {
        loop {
            if ctx.closing.load(Ordering::Relaxed) {
                return false;
            }
            let desired = ctx.desired_concurrency.load(Ordering::Relaxed);
            let current = ctx.active_fetchers.load(Ordering::Relaxed);
            if current < desired {
                if ctx
                    .active_fetchers
                    .compare_exchange_weak(
                        current,
                        current + 1,
                        Ordering::SeqCst,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    return true;
                }
            } else {
                ctx.concurrency_gate.notified().await;
            }
        }
    }

    /// Release a concurrency slot and notify waiters.
    fn release_concurrency_slot(ctx: &LoopContext) {
        ctx.active_fetchers.fetch_sub(1, Ordering::SeqCst);
        ctx.concurrency_gate.notify_one();
    }
    /// Process a job that was successfully fetched from the queue.
    ///
    /// Returns the next job to process when the finishing script fetched one in
    /// the same round-trip (see [`Self::move_to_finished_fast`]). The caller can
    /// process the returned job directly, reusing `token`, without issuing a
    /// separate `moveToActive` call.
    ///
    /// A grouped worker's job gives back its group slot and takes the next job
    /// (`end_group_turn`) once its handler is done.
    async fn process_fetched_job(ctx: &LoopContext, mut job: Job, token: &str) -> Option<Job> {
        let group_slot = ctx
            .groups
            .as_ref()
            .map(|_| crate::ext::groups::Grouping::slot_of(&job));
        let cancel_token = CancellationToken::new();
        let job_id = job.id().to_string();
        let job_attempts = job.opts().attempts.unwrap_or(0);
        let job_attempts_made = job.attempts_made();
        let job_opts = job.opts().clone();
        let job_data = job.data().clone();
        let repeat_job_key = job.repeat_job_key().map(|s| s.to_string());
        // Each failed attempt adds its entry to the ones before it (`failure_record`).
        let previous_stacktrace = job.stacktrace().to_string();

        // Attach script context so job can call update_progress, etc.
        job.set_context(crate::job::ScriptContext {
            conn: ctx.conn.clone(),
            keys: ctx.keys.clone(),
            progress_tx: ctx.progress_tx.clone(),
            token: token.to_string(),
            lock_duration: ctx.opts.lock_duration,
        });

        // Register as active
        {
            let mut jobs = ctx.active_jobs.write().await;
            jobs.push(ActiveJob {
                job_id: job_id.clone(),
                token: token.to_string(),
                cancel_token: cancel_token.clone(),
            });
        }

        let _ = ctx.event_tx.send(WorkerEvent::Active {
            job_id: job_id.clone(),
        });

        // Determine if the job must fail before processing, mirroring Node.js
        // `getUnrecoverableErrorMessage`: a deferred failure (parent failed via
        // failParentOnFailure) takes precedence, otherwise the job is rejected
        // when it has started more times than `max_started_attempts` allows.
        let unrecoverable_reason = Self::unrecoverable_before_run(ctx, &job);

        if let Some(reason) = unrecoverable_reason {
            if let Some(scheduler_id) = &repeat_job_key {
                Self::schedule_next_run(ctx, scheduler_id, &job_id, &job_data, &job_opts).await;
            }
            let err = Error::Unrecoverable(reason);
            let next_job = Self::handle_job_failed(
                ctx,
                &job_id,
                token,
                err,
                job_attempts,
                job_attempts_made,
                &job_opts,
                &job_data,
                &previous_stacktrace,
                Self::should_fetch_next(ctx),
            )
            .await;
            // Remove from active jobs before returning early, otherwise close()
            // would wait for this job to drain until its timeout elapses.
            {
                let mut jobs = ctx.active_jobs.write().await;
                jobs.retain(|j| j.job_id != job_id);
            }
            return Self::after_group_turn(ctx, group_slot.as_ref(), token, next_job).await;
        }

        // Run the processor. A scheduler's run makes the next one as it starts, beside
        // the processor, as Node's worker does when it fetches the job: made only once
        // the run ended, the next run was lost when that call failed or the process died
        // first, and the scheduler stopped (change 32).
        let discarded = job.discarded_handle();
        let processed = ctx.placement.run(&ctx.processor, job, cancel_token);
        let result = match &repeat_job_key {
            Some(scheduler_id) => {
                let next_run =
                    Self::schedule_next_run(ctx, scheduler_id, &job_id, &job_data, &job_opts);
                tokio::join!(next_run, processed).1
            }
            None => processed.await,
        };

        // Decide whether to fetch the next job in the same round-trip as the
        // finishing script. Mirrors the Node.js `fetchNextCallback`: only chain
        // when we are not shutting down/paused and still within the concurrency
        // budget (this loop already owns one slot).
        let fetch_next = Self::should_fetch_next(ctx);

        let finishing = Self::finish_attempt(
            ctx,
            result,
            &job_id,
            token,
            job_attempts,
            job_attempts_made,
            &job_opts,
            &job_data,
            &previous_stacktrace,
            &discarded,
            fetch_next,
        );
        let next_job = finishing.await;
        let next_job = Self::after_group_turn(ctx, group_slot.as_ref(), token, next_job).await;

        // Remove from active jobs
        {
            let mut jobs = ctx.active_jobs.write().await;
            jobs.retain(|j| j.job_id != job_id);
        }

        next_job
    }

    /// Why `job` must fail before it runs, if it must: upstream's check of
    /// `process_fetched_job`, a function of its own so that a batch's jobs (change 36)
    /// are checked by it too.
    fn unrecoverable_before_run(ctx: &LoopContext, job: &Job) -> Option<String> {
        job.deferred_failure().map(|s| s.to_string()).or_else(|| {
            match ctx.opts.max_started_attempts {
                Some(max) if max < job.attempts_started() => {
                    Some("job started more than allowable limit".to_string())
                }
                _ => None,
            }
        })
    }

    /// Records the attempt's outcome (`result`): the job's completion or failure.
    /// Upstream's code of `process_fetched_job`, moved here: a grouped worker's turn
    /// goes out beside it (`end_group_turn`, PATCHES.md change 21), and a function of
    /// its own keeps upstream's text as it was, but for a scheduler's next run, now made
    /// when the run starts (change 32).
    #[allow(
        clippy::too_many_arguments,
        clippy::needless_borrow,
        clippy::let_and_return
    )]
    async fn finish_attempt(
        ctx: &LoopContext,
        result: Result<serde_json::Value, Error>,
        job_id: &str,
        token: &str,
        job_attempts: u32,
        job_attempts_made: u32,
        job_opts: &JobOptions,
        job_data: &serde_json::Value,
        previous_stacktrace: &str,
        discarded: &AtomicBool,
        fetch_next: bool,
    ) -> Option<Job> {
        let next_job = match result {
            Ok(return_value) => {
                let next = Self::handle_job_completed(
                    ctx,
                    &job_id,
                    token,
                    &return_value,
                    job_attempts,
                    job_attempts_made,
                    &job_opts,
                    &job_data,
                    &previous_stacktrace,
                    fetch_next,
                )
                .await;

                next
            }
            Err(e) => {
                // If the processor called `job.discard()`, treat the failure as
                // unrecoverable so the job is not retried (mirrors Node.js).
                // The failure itself is judged; its stack text goes along unchanged.
                let (e, stack) = e.without_stacktrace();
                let e = if discarded.load(Ordering::SeqCst) && should_convert_discarded_error(&e) {
                    Error::Unrecoverable(e.to_string())
                } else {
                    e
                };
                let e = match stack {
                    Some(stack) => e.with_stacktrace(stack),
                    None => e,
                };
                let next = Self::handle_job_failed(
                    ctx,
                    &job_id,
                    token,
                    e,
                    job_attempts,
                    job_attempts_made,
                    &job_opts,
                    &job_data,
                    &previous_stacktrace,
                    fetch_next,
                )
                .await;

                next
            }
        };

        next_job
    }

    /// A grouped attempt's end when its finish took no next job: the finish
    /// (`groupFinish`, change 34) gave its slot back and found nothing to take, or the
    /// attempt did not end in a finish (a retry) and its slot is still held. Either
    /// way one `groupTake` gives back what is held (nothing after a finish) and takes
    /// the next job; on the busy path the finish took it and this costs nothing.
    async fn after_group_turn(
        ctx: &LoopContext,
        slot: Option<&crate::ext::groups::Slot>,
        token: &str,
        next_job: Option<Job>,
    ) -> Option<Job> {
        match (ctx.groups.as_ref(), slot, next_job) {
            (Some(groups), Some(slot), None) => {
                Self::end_group_turn(ctx, groups, slot, token).await
            }
            (_, _, next_job) => next_job,
        }
    }

    /// Whether the finishing script should also fetch the next job in the same
    /// round-trip. Mirrors the Node.js `fetchNextCallback`.
    fn should_fetch_next(ctx: &LoopContext) -> bool {
        !ctx.closing.load(Ordering::Relaxed)
            && !ctx.paused.load(Ordering::Relaxed)
            && ctx.active_fetchers.load(Ordering::Relaxed)
                <= ctx.desired_concurrency.load(Ordering::Relaxed)
    }

    /// Handle a successfully completed job.
    ///
    /// Returns the next job to process when `fetch_next` was honoured by the
    /// `moveToFinished` script (single round-trip completion + fetch).
    #[allow(clippy::too_many_arguments)]
    async fn handle_job_completed(
        ctx: &LoopContext,
        job_id: &str,
        token: &str,
        return_value: &serde_json::Value,
        job_attempts: u32,
        job_attempts_made: u32,
        job_opts: &JobOptions,
        job_data: &serde_json::Value,
        previous_stacktrace: &str,
        fetch_next: bool,
    ) -> Option<Job> {
        let result = Self::finish(
            ctx,
            Finish {
                job_id,
                token,
                value: return_value,
                fields: &[],
                job_attempts,
                job_opts,
                target: "completed",
                fetch_next,
            },
        )
        .await;
        match result {
            Ok(next_job) => {
                let _ = ctx.event_tx.send(WorkerEvent::Completed {
                    job_id: job_id.to_string(),
                    result: return_value.clone(),
                });
                next_job
            }
            Err(e) => {
                // A negative status code from moveToFinished means the job could not be
                // completed (e.g. it still has pending or failed children). Mirror the
                // Node.js behaviour: turn the script code into a descriptive error and
                // move the job to the failed state.
                if let Error::Script { code, .. } = e {
                    let mapped = finished_error(code, job_id, "moveToFinished", "active");
                    return Self::handle_job_failed(
                        ctx,
                        job_id,
                        token,
                        mapped,
                        job_attempts,
                        job_attempts_made,
                        job_opts,
                        job_data,
                        previous_stacktrace,
                        fetch_next,
                    )
                    .await;
                }

                error!(job_id = %job_id, error = %e, "failed to move job to completed");
                let _ = ctx.event_tx.send(WorkerEvent::Error(e.to_string()));
                None
            }
        }
    }

    /// Makes the next run of the scheduler whose run `job_id` is starting, sending the
    /// call again until Redis answers it (it is idempotent: a second one finds the next
    /// run made, or the scheduler moved on, and does nothing).
    async fn schedule_next_run(
        ctx: &LoopContext,
        scheduler_id: &str,
        job_id: &str,
        job_data: &serde_json::Value,
        job_opts: &JobOptions,
    ) {
        let retry = crate::ext::finishing::Retry {
            job_id,
            what: "the scheduler's next run",
            closing: &ctx.closing,
            lock_duration: Duration::from_millis(ctx.opts.lock_duration),
        };
        let (result, _) = retry
            .run(|| Self::update_job_scheduler(ctx, scheduler_id, job_id, job_data, job_opts))
            .await;
        if let Err(e) = result {
            error!(
                job_id = %job_id,
                scheduler_id = %scheduler_id,
                error = %e,
                "failed to schedule next iteration"
            );
            let _ = ctx.event_tx.send(WorkerEvent::Error(format!(
                "Failed to add repeatable job for next iteration: {}",
                e
            )));
        }
    }

    /// Schedule the next iteration of a repeatable job by calling the
    /// `updateJobScheduler` Lua script. This is the critical path that
    /// keeps job schedulers running — must never silently swallow errors.
    async fn update_job_scheduler(
        ctx: &LoopContext,
        scheduler_id: &str,
        job_id: &str,
        job_data: &serde_json::Value,
        job_opts: &JobOptions,
    ) -> Result<(), Error> {
        use crate::job_scheduler::next_cron_millis;
        use std::time::{SystemTime, UNIX_EPOCH};

        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;

        // Check limit: if we have repeat options with a limit, enforce it
        if let Some(ref repeat) = job_opts.repeat {
            if let Some(limit) = repeat.limit {
                let next_count = repeat.count.map(|c| c + 1).unwrap_or(1);
                if next_count > limit {
                    return Ok(()); // Limit reached, don't schedule next
                }
            }

            // Check end date
            if let Some(end_date) = repeat.end_date {
                if now > end_date {
                    return Ok(()); // Past end date, don't schedule next
                }
            }
        }

        // Compute nextMillis for cron patterns (for `every`, the Lua script handles it)
        let next_millis: u64 = if let Some(ref repeat) = job_opts.repeat {
            if let Some(ref pattern) = repeat.pattern {
                // The next time after this run's own, or after now if later: a run
                // that starts before its time (promoted, or a worker's clock behind
                // the producer's) must not be handed its own time as the next one,
                // whose job id it already holds ("duplicated", and the scheduler
                // stopped). Its time is in its id, `repeat:<scheduler>:<millis>`.
                let own_time = job_id
                    .rsplit_once(':')
                    .and_then(|(_, millis)| millis.parse::<u64>().ok());
                let reference = [Some(now), job_opts.prev_millis, own_time]
                    .into_iter()
                    .flatten()
                    .max()
                    .unwrap_or(now);

                match next_cron_millis(pattern, reference, repeat.tz.as_deref(), repeat.start_date)
                {
                    Ok(Some(ms)) => {
                        if ms < now {
                            now
                        } else {
                            ms
                        }
                    }
                    Ok(None) => return Ok(()), // No next occurrence
                    Err(e) => {
                        return Err(Error::InvalidConfig(format!(
                            "cron computation failed for scheduler '{}': {}",
                            scheduler_id, e
                        )));
                    }
                }
            } else {
                // For `every`-based schedulers, pass 0; the Lua script recomputes
                0
            }
        } else {
            // No repeat options on the job — the Lua script reads from the scheduler hash
            0
        };

        // Build the msgpacked opts for the Lua script
        let opts_packed = Self::pack_update_scheduler_opts(job_opts);

        // Template data
        let template_data = serde_json::to_string(job_data).unwrap_or_else(|_| "{}".to_string());

        let script = ctx
            .conn
            .scripts()
            .get("updateJobScheduler")
            .ok_or_else(|| Error::InvalidConfig("updateJobScheduler script not found".to_string()))?
            .clone();

        // Build keys (12 keys)
        let repeat_key = ctx.keys.repeat();
        let delayed_key = ctx.keys.delayed();
        let wait_key = ctx.keys.wait();
        let paused_key = ctx.keys.paused();
        let meta_key = ctx.keys.meta();
        let prioritized_key = ctx.keys.prioritized();
        let marker_key = ctx.keys.marker();
        let id_key = ctx.keys.id();
        let events_key = ctx.keys.events();
        let pc_key = ctx.keys.pc();
        let producer_key = ctx.keys.job_key(job_id);
        let active_key = ctx.keys.active();

        let script_keys: Vec<&str> = vec![
            &repeat_key,
            &delayed_key,
            &wait_key,
            &paused_key,
            &meta_key,
            &prioritized_key,
            &marker_key,
            &id_key,
            &events_key,
            &pc_key,
            &producer_key,
            &active_key,
        ];

        // Build args (7 args)
        let next_millis_str = next_millis.to_string();
        let now_str = now.to_string();
        let prefix = ctx.keys.key_prefix();

        let args: Vec<&[u8]> = vec![
            next_millis_str.as_bytes(), // ARGV[1] nextMillis
            scheduler_id.as_bytes(),    // ARGV[2] jobSchedulerId
            template_data.as_bytes(),   // ARGV[3] template data (JSON)
            &opts_packed,               // ARGV[4] msgpacked opts
            now_str.as_bytes(),         // ARGV[5] timestamp
            prefix.as_bytes(),          // ARGV[6] prefix key
            job_id.as_bytes(),          // ARGV[7] producerId
        ];

        let mut redis_conn = ctx.conn.connection();
        let _result = script.execute(&mut redis_conn, &script_keys, &args).await?;

        // Script returns the next job ID on success, or nil if scheduler
        // was removed/doesn't exist. Both are valid outcomes.
        Ok(())
    }

    /// Pack job options into msgpack format for the updateJobScheduler script.
    fn pack_update_scheduler_opts(job_opts: &JobOptions) -> Vec<u8> {
        use rmp::encode::*;

        let mut entries: Vec<(&str, Vec<u8>)> = Vec::new();

        // repeat sub-map — include ALL fields so they propagate to the next job
        if let Some(ref repeat) = job_opts.repeat {
            let mut repeat_entries: Vec<(&str, Vec<u8>)> = Vec::new();

            if let Some(every) = repeat.every {
                let mut b = Vec::new();
                write_uint(&mut b, every).unwrap();
                repeat_entries.push(("every", b));
            }

            if let Some(ref pattern) = repeat.pattern {
                let mut b = Vec::new();
                write_str(&mut b, pattern).unwrap();
                repeat_entries.push(("pattern", b));
            }

            if let Some(offset) = repeat.offset {
                let mut b = Vec::new();
                write_uint(&mut b, offset).unwrap();
                repeat_entries.push(("offset", b));
            }

            // Increment count for the next iteration
            let next_count = repeat.count.map(|c| c + 1).unwrap_or(1);
            {
                let mut b = Vec::new();
                write_uint(&mut b, next_count).unwrap();
                repeat_entries.push(("count", b));
            }

            if let Some(limit) = repeat.limit {
                let mut b = Vec::new();
                write_uint(&mut b, limit).unwrap();
                repeat_entries.push(("limit", b));
            }

            if let Some(ref tz) = repeat.tz {
                let mut b = Vec::new();
                write_str(&mut b, tz).unwrap();
                repeat_entries.push(("tz", b));
            }

            if let Some(start_date) = repeat.start_date {
                let mut b = Vec::new();
                write_uint(&mut b, start_date).unwrap();
                repeat_entries.push(("startDate", b));
            }

            if let Some(end_date) = repeat.end_date {
                let mut b = Vec::new();
                write_uint(&mut b, end_date).unwrap();
                repeat_entries.push(("endDate", b));
            }

            let mut repeat_buf = Vec::new();
            write_map_len(&mut repeat_buf, repeat_entries.len() as u32).unwrap();
            for (key, val) in &repeat_entries {
                write_str(&mut repeat_buf, key).unwrap();
                repeat_buf.extend_from_slice(val);
            }

            entries.push(("repeat", repeat_buf));
        } else {
            // Empty repeat map - script may still need it
            let mut repeat_buf = Vec::new();
            write_map_len(&mut repeat_buf, 0).unwrap();
            entries.push(("repeat", repeat_buf));
        }

        // repeatJobKey
        if let Some(ref rjk) = job_opts.repeat_job_key {
            let mut b = Vec::new();
            write_str(&mut b, rjk).unwrap();
            entries.push(("repeatJobKey", b));
        }

        // attempts
        if let Some(attempts) = job_opts.attempts {
            let mut b = Vec::new();
            write_uint(&mut b, attempts as u64).unwrap();
            entries.push(("attempts", b));
        }

        // backoff
        if let Some(ref backoff) = job_opts.backoff {
            let b = crate::queue::Queue::encode_backoff(backoff);
            entries.push(("backoff", b));
        }

        // removeOnComplete
        if let Some(ref roc) = job_opts.remove_on_complete {
            let b = crate::queue::Queue::encode_remove_on_finish(roc);
            entries.push(("removeOnComplete", b));
        }

        // removeOnFail
        if let Some(ref rof) = job_opts.remove_on_fail {
            let b = crate::queue::Queue::encode_remove_on_finish(rof);
            entries.push(("removeOnFail", b));
        }

        // priority
        if let Some(priority) = job_opts.priority {
            if priority > 0 {
                let mut b = Vec::new();
                write_uint(&mut b, priority as u64).unwrap();
                entries.push(("priority", b));
            }
        }

        crate::queue::push_extensions(&mut entries, job_opts);

        // Encode as msgpack map
        let mut buf = Vec::with_capacity(128);
        write_map_len(&mut buf, entries.len() as u32).unwrap();
        for (key, val) in &entries {
            write_str(&mut buf, key).unwrap();
            buf.extend_from_slice(val);
        }

        buf
    }

    /// Handle a failed job — retry or move to permanent failure.
    #[allow(clippy::too_many_arguments)]
    async fn handle_job_failed(
        ctx: &LoopContext,
        job_id: &str,
        token: &str,
        error: Error,
        job_attempts: u32,
        job_attempts_made: u32,
        job_opts: &JobOptions,
        job_data: &serde_json::Value,
        previous_stacktrace: &str,
        fetch_next: bool,
    ) -> Option<Job> {
        let (error, stacktrace) = error.without_stacktrace();
        // DelayedError / WaitingChildren: job was already moved by the processor
        if matches!(error, Error::Delayed | Error::WaitingChildren) {
            return None;
        }

        // The processor reports that the job's lock is no longer this run's (its
        // lock renewal found another worker holding it): the job is that worker's
        // now. Moving it under this run's token would be refused ("lock mismatch")
        // and report a failure of a job that did not fail.
        if matches!(error, Error::JobLockNotExist(_)) {
            debug!(job_id = %job_id, "the job's lock was lost; leaving the job to its new owner");
            return None;
        }

        // RateLimited: the processor called `queue.rate_limit(..)` and signalled a
        // rate-limit. Move the job back from active to wait/prioritized instead of
        // failing it. When it is re-fetched it will respect the rate-limit TTL.
        if matches!(error, Error::RateLimited { .. }) {
            if let Err(e) = Self::move_job_from_active_to_wait(ctx, job_id, token).await {
                error!(job_id = %job_id, error = %e, "failed to move rate-limited job back to wait");
                let _ = ctx.event_tx.send(WorkerEvent::Error(e.to_string()));
            }
            return None;
        }

        // What the job's hash records of this attempt, whatever happens next.
        let fields = failure_fields(
            &error.to_string(),
            stacktrace.as_deref(),
            previous_stacktrace,
            job_opts.stack_trace_limit,
        );
        let is_unrecoverable = matches!(error, Error::Unrecoverable(_));
        let should_retry =
            !is_unrecoverable && job_attempts > 0 && (job_attempts_made + 1) < job_attempts;

        if should_retry {
            Self::handle_retry(
                ctx,
                job_id,
                token,
                &error,
                &fields,
                job_attempts,
                job_attempts_made,
                job_opts,
                job_data,
            )
            .await;
            None
        } else {
            Self::move_to_permanent_failure(
                ctx,
                job_id,
                token,
                &error,
                &fields,
                job_attempts,
                job_opts,
                fetch_next,
            )
            .await
        }
    }

    /// Attempt to retry a failed job (with or without backoff).
    #[allow(clippy::too_many_arguments)]
    async fn handle_retry(
        ctx: &LoopContext,
        job_id: &str,
        token: &str,
        error: &Error,
        fields: &[u8],
        job_attempts: u32,
        job_attempts_made: u32,
        job_opts: &JobOptions,
        job_data: &serde_json::Value,
    ) {
        let retry_result = if let Some(ref backoff) = job_opts.backoff {
            let delay = Self::calculate_backoff(
                backoff,
                job_attempts_made + 1,
                &error.to_string(),
                job_data,
                ctx.opts.backoff_strategy.as_ref(),
            )
            .await;

            if delay == -1 {
                // Custom backoff says don't retry — move to failed.
                // Never fetch the next job here: the retry path discards the
                // return value, so a chained job would be stranded in active.
                Self::move_to_permanent_failure(
                    ctx,
                    job_id,
                    token,
                    error,
                    fields,
                    job_attempts,
                    job_opts,
                    false,
                )
                .await;
                return;
            } else if delay > 0 {
                let retry = Self::finishing_retry(ctx, job_id, "the job's move to delayed");
                retry
                    .run(|| {
                        Self::move_to_delayed_for_retry(
                            &ctx.conn,
                            &ctx.keys,
                            job_id,
                            token,
                            &ctx.prefix_bytes,
                            delay as u64,
                            &ctx.opts,
                            fields,
                        )
                    })
                    .await
            } else {
                let retry = Self::finishing_retry(ctx, job_id, "the job's retry");
                retry
                    .run(|| {
                        Self::retry_job_immediately(
                            &ctx.conn,
                            &ctx.keys,
                            job_id,
                            token,
                            &ctx.prefix_bytes,
                            fields,
                        )
                    })
                    .await
            }
        } else {
            let retry = Self::finishing_retry(ctx, job_id, "the job's retry");
            retry
                .run(|| {
                    Self::retry_job_immediately(
                        &ctx.conn,
                        &ctx.keys,
                        job_id,
                        token,
                        &ctx.prefix_bytes,
                        fields,
                    )
                })
                .await
        };

        match retry_result {
            // Emit Failed event for each attempt (matches Node.js behavior), once
            // the retry is recorded (as Node.js, which emits after `moveToFailed`).
            (Ok(()), _) => {
                let _ = ctx.event_tx.send(WorkerEvent::Failed {
                    job_id: job_id.to_string(),
                    error: error.to_string(),
                });
            }
            (Err(retry_err), retried) => {
                // Refused after a try whose answer was lost: that try may have been
                // carried out. Either way, nothing to report as this run's.
                if retried && matches!(retry_err, Error::Script { .. }) {
                    debug!(job_id = %job_id, error = %retry_err, "retry refused after an unanswered try");
                } else {
                    error!(job_id = %job_id, error = %retry_err, "failed to retry job");
                }
                let _ = ctx.event_tx.send(WorkerEvent::Error(retry_err.to_string()));
            }
        }
    }

    /// Move a job to permanent failure state.
    ///
    /// Returns the next job to process when `fetch_next` was honoured by the
    /// `moveToFinished` script (single round-trip failure + fetch).
    #[allow(clippy::too_many_arguments)]
    async fn move_to_permanent_failure(
        ctx: &LoopContext,
        job_id: &str,
        token: &str,
        error: &Error,
        fields: &[u8],
        job_attempts: u32,
        job_opts: &JobOptions,
        fetch_next: bool,
    ) -> Option<Job> {
        let error_value = serde_json::Value::String(error.to_string());
        let result = Self::finish(
            ctx,
            Finish {
                job_id,
                token,
                value: &error_value,
                fields,
                job_attempts,
                job_opts,
                target: "failed",
                fetch_next,
            },
        )
        .await;
        match result {
            // Emitted once the failure is recorded, as Node.js does.
            Ok(next) => {
                let _ = ctx.event_tx.send(WorkerEvent::Failed {
                    job_id: job_id.to_string(),
                    error: error.to_string(),
                });
                next
            }
            Err(move_err) => {
                error!(job_id = %job_id, error = %move_err, "failed to move job to failed");
                let _ = ctx.event_tx.send(WorkerEvent::Error(move_err.to_string()));
                None
            }
        }
    }

    /// Moves an attempt's job to `completed` or `failed` (`moveToFinished`), sent again
    /// with the lock token while Redis does not answer. A resend the script refuses is
    /// done when an earlier unanswered try already moved the job there; the fetch it
    /// chained is then resumed by its token.
    async fn finish(ctx: &LoopContext, finish: Finish<'_>) -> Result<Option<Job>, Error> {
        let Finish {
            job_id,
            token,
            value,
            fields,
            job_attempts,
            job_opts,
            target,
            fetch_next,
        } = finish;
        let (what, finished_key, metrics_key) = if target == "completed" {
            (
                "the job's completion",
                &ctx.completed_key,
                &ctx.metrics_completed_key,
            )
        } else {
            (
                "the job's move to failed",
                &ctx.failed_key,
                &ctx.metrics_failed_key,
            )
        };
        // A grouped job's finish also gives back its group's slot and takes the next
        // job by group: one script (`groupFinish`, change 34).
        let slot = ctx.groups.as_ref().map(|_| crate::ext::groups::Slot {
            group: crate::ext::groups::group_of(job_opts)
                .unwrap_or_default()
                .into_owned(),
            job_id: job_id.to_owned(),
        });
        let grouped = ctx
            .groups
            .as_ref()
            .zip(slot.as_ref())
            .map(|(groups, slot)| groups.finish_extras(slot, fetch_next));
        let retry = Self::finishing_retry(ctx, job_id, what);
        let (result, retried) = retry
            .run(|| {
                Self::move_to_finished_fast(
                    &ctx.conn,
                    grouped.as_ref(),
                    &ctx.move_to_finished_base_keys,
                    &ctx.prefix_bytes,
                    &ctx.keys,
                    job_id,
                    token,
                    value,
                    fields,
                    job_attempts,
                    &ctx.opts,
                    job_opts,
                    target,
                    finished_key,
                    metrics_key,
                    &ctx.marker_key,
                    fetch_next,
                )
            })
            .await;
        match result {
            Err(Error::Script { .. })
                if retried
                    && crate::ext::finishing::finished_earlier(
                        &ctx.conn,
                        &ctx.keys,
                        job_id,
                        finished_key,
                    )
                    .await =>
            {
                Ok(match fetch_next {
                    true => {
                        crate::ext::finishing::resume_chained_fetch(&ctx.conn, &ctx.keys, token)
                            .await
                    }
                    false => None,
                })
            }
            result => result,
        }
    }

    /// How a finishing command of `job_id` is sent again when it does not reach
    /// Redis (`crate::ext::finishing`).
    fn finishing_retry<'a>(
        ctx: &'a LoopContext,
        job_id: &'a str,
        what: &'a str,
    ) -> crate::ext::finishing::Retry<'a> {
        crate::ext::finishing::Retry {
            job_id,
            what,
            closing: &ctx.closing,
            lock_duration: Duration::from_millis(ctx.opts.lock_duration),
        }
    }

    /// Move a job from the active list back to wait (or prioritized, if it has a
    /// priority). Used when a processor signals a rate-limit via
    /// [`Error::RateLimited`].
    async fn move_job_from_active_to_wait(
        ctx: &LoopContext,
        job_id: &str,
        token: &str,
    ) -> Result<(), Error> {
        let script = ctx
            .conn
            .scripts()
            .get("moveJobFromActiveToWait")
            .ok_or_else(|| {
                Error::InvalidConfig("moveJobFromActiveToWait script not found".to_string())
            })?
            .clone();

        let keys = &ctx.keys;
        let job_key = keys.job_key(job_id);
        let script_keys: Vec<String> = vec![
            keys.active(),
            keys.wait(),
            keys.stalled(),
            keys.paused(),
            keys.meta(),
            keys.limiter(),
            keys.prioritized(),
            keys.marker(),
            keys.events(),
        ];

        let args: Vec<&[u8]> = vec![job_id.as_bytes(), token.as_bytes(), job_key.as_bytes()];

        let mut conn = ctx.conn.connection();
        let result: redis::Value = script.execute(&mut conn, &script_keys, &args).await?;

        match result {
            redis::Value::Int(code) if code < 0 => Err(Error::from_script_code(code)),
            _ => Ok(()),
        }
    }

    /// Takes the next job of the next group in turn (`groupTake`, PATCHES.md
    /// change 21); answers as a `moveToActive` fetch.
    async fn take_grouped(
        ctx: &LoopContext,
        groups: &crate::ext::groups::Grouping,
        token: &str,
    ) -> Result<FetchResult, Error> {
        let opts_packed = pack_move_to_active_opts(token, &ctx.opts);
        let result = groups.take(&ctx.conn, &opts_packed, None, true).await?;
        Self::parse_move_to_active_result(&result)
    }

    /// After a grouped attempt: gives back its group slot and, when this task may go
    /// on (as a finishing script's `fetchNext` would), takes the next job in the same
    /// call, so that tasks take their next jobs in parallel rather than one by one
    /// through the fetch driver. On failure the slot comes back once its lock is found
    /// gone (`groupTake`'s repair), and a job taken under the token by a call whose
    /// answer was lost comes back through stalled-job recovery.
    async fn end_group_turn(
        ctx: &LoopContext,
        groups: &crate::ext::groups::Grouping,
        slot: &crate::ext::groups::Slot,
        token: &str,
    ) -> Option<Job> {
        let go_on = !ctx.closing.load(Ordering::Relaxed)
            && !ctx.paused.load(Ordering::Relaxed)
            && ctx.active_fetchers.load(Ordering::Relaxed)
                <= ctx.desired_concurrency.load(Ordering::Relaxed);
        let opts_packed = pack_move_to_active_opts(token, &ctx.opts);
        let taken = groups
            .take(&ctx.conn, &opts_packed, Some(slot), go_on)
            .await
            .and_then(|reply| Self::parse_move_to_active_result(&reply));
        match taken {
            Ok(FetchResult::Job(job)) => Some(*job),
            Ok(_) => None,
            Err(e) => {
                warn!(error = %e, ?slot, "cannot give back a group slot and take the next job; the slot comes back once its lock is gone");
                None
            }
        }
    }

    /// Try to fetch a job using the moveToActive script only (non-blocking).
    /// Fast version of try_fetch_job that uses pre-computed keys and prefix.
    async fn try_fetch_job_fast(
        conn: &RedisConnection,
        script_keys: &[String],
        prefix_bytes: &[u8],
        token: &str,
        opts: &WorkerOptions,
    ) -> Result<FetchResult, Error> {
        let script = conn
            .scripts()
            .get("moveToActive")
            .ok_or_else(|| Error::InvalidConfig("moveToActive script not found".to_string()))?
            .clone();

        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;

        let opts_packed = pack_move_to_active_opts(token, opts);
        let now_bytes = now.to_string().into_bytes();
        let args: Vec<&[u8]> = vec![prefix_bytes, &now_bytes, &opts_packed];

        let mut redis_conn = conn.connection();
        let result = script.execute(&mut redis_conn, script_keys, &args).await?;

        Self::parse_move_to_active_result(&result)
    }

    /// Fast version of move_to_completed/failed using pre-computed base keys.
    ///
    /// When `fetch_next` is `true`, the `moveToFinished` script also fetches and
    /// locks the next job to process in the same round-trip (mirroring the
    /// Node.js worker). The fetched job — if any — is returned so the caller can
    /// process it directly without an extra `moveToActive` call. The fetched
    /// job is locked with the same `token` that finished the current job.
    #[allow(clippy::too_many_arguments)]
    async fn move_to_finished_fast(
        conn: &RedisConnection,
        grouped: Option<&crate::ext::groups::FinishExtras<'_>>,
        base_keys: &[String],
        prefix_bytes: &[u8],
        keys: &QueueKeys,
        job_id: &str,
        token: &str,
        value: &serde_json::Value,
        fields_to_update: &[u8],
        attempts: u32,
        opts: &WorkerOptions,
        job_opts: &JobOptions,
        target: &str,
        target_set_key: &str,
        metrics_key: &str,
        marker_key: &str,
        fetch_next: bool,
    ) -> Result<Option<Job>, Error> {
        let script_name = if grouped.is_some() {
            "groupFinish"
        } else {
            "moveToFinished"
        };
        let script = conn
            .scripts()
            .get(script_name)
            .ok_or_else(|| Error::InvalidConfig(format!("{script_name} script not found")))?
            .clone();

        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;

        let value_str = serde_json::to_string(value).unwrap_or_default();

        // For failedReason, store the raw string (not JSON-encoded).
        // For returnvalue, store the JSON-encoded value.
        let failed_reason_str: String;
        let field_value_str: &str = if target == "failed" {
            failed_reason_str = value.as_str().unwrap_or_default().to_string();
            &failed_reason_str
        } else {
            &value_str
        };

        // Build full keys: base_keys[0..10] + target set + job key + metrics key + marker
        let job_key = keys.job_key(job_id);

        let mut script_keys: Vec<&str> = Vec::with_capacity(18);
        for k in base_keys.iter() {
            script_keys.push(k);
        }
        script_keys.push(target_set_key);
        script_keys.push(&job_key);
        script_keys.push(metrics_key);
        script_keys.push(marker_key);
        if let Some(grouped) = grouped {
            script_keys.extend(grouped.keys.iter().map(String::as_str));
        }

        let (field_name, field_value): (&[u8], &[u8]) = if target == "completed" {
            (b"returnvalue", field_value_str.as_bytes())
        } else {
            (b"failedReason", field_value_str.as_bytes())
        };

        let job_id_bytes = job_id.as_bytes();
        let now_bytes = now.to_string().into_bytes();
        let opts_packed = pack_move_to_finished_opts(token, opts, job_opts, attempts, target);
        // A grouped finish always runs its take (which gives the slot back), told
        // apart whether to take a job.
        let fetch_next_flag: &[u8] = if fetch_next || grouped.is_some() {
            b"1"
        } else {
            b"0"
        };
        let mut args: Vec<&[u8]> = vec![
            job_id_bytes,
            &now_bytes,
            field_name,
            field_value,
            target.as_bytes(),
            fetch_next_flag,
            prefix_bytes,
            &opts_packed,
            fields_to_update,
        ];
        if let Some(grouped) = grouped {
            args.extend(grouped.args);
        }

        let mut redis_conn = conn.connection();
        let result = script.execute(&mut redis_conn, &script_keys, &args).await?;

        match result {
            redis::Value::Int(code) if code < 0 => Err(Error::from_script_code(code)),
            // When `fetch_next` is set, the script returns the next job in the
            // same `[HGETALL, jobId, expireTime, nextTimestamp]` shape as
            // `moveToActive`. Any non-job result (rate limited, delayed marker,
            // drained) simply means there is nothing to chain into.
            redis::Value::Array(_) if fetch_next => {
                match Self::parse_move_to_active_result(&result)? {
                    FetchResult::Job(job) => Ok(Some(*job)),
                    _ => Ok(None),
                }
            }
            _ => Ok(None),
        }
    }

    /// Retry a failed job by moving it back to the wait queue (no backoff).
    async fn retry_job_immediately(
        conn: &RedisConnection,
        keys: &QueueKeys,
        job_id: &str,
        token: &str,
        prefix: &[u8],
        fields_to_update: &[u8],
    ) -> Result<(), Error> {
        let script = conn
            .scripts()
            .get("retryJob")
            .ok_or_else(|| Error::InvalidConfig("retryJob script not found".to_string()))?
            .clone();

        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;

        let job_key = keys.job_key(job_id);
        let active = keys.active();
        let wait = keys.wait();
        let paused = keys.paused();
        let meta = keys.meta();
        let events = keys.events();
        let delayed = keys.delayed();
        let prioritized = keys.prioritized();
        let pc = keys.pc();
        let marker = keys.marker();
        let stalled = keys.stalled();

        let script_keys: Vec<&str> = vec![
            &active,      // KEYS[1]
            &wait,        // KEYS[2]
            &paused,      // KEYS[3]
            &job_key,     // KEYS[4]
            &meta,        // KEYS[5]
            &events,      // KEYS[6]
            &delayed,     // KEYS[7]
            &prioritized, // KEYS[8]
            &pc,          // KEYS[9]
            &marker,      // KEYS[10]
            &stalled,     // KEYS[11]
        ];

        let prefix_str = std::str::from_utf8(prefix).unwrap_or("");
        let now_str = now.to_string();
        let push_cmd = b"LPUSH";

        let args: Vec<&[u8]> = vec![
            prefix_str.as_bytes(), // ARGV[1] key prefix
            now_str.as_bytes(),    // ARGV[2] timestamp
            push_cmd,              // ARGV[3] pushCmd
            job_id.as_bytes(),     // ARGV[4] jobId
            token.as_bytes(),      // ARGV[5] token
            fields_to_update,      // ARGV[6] optional fields
        ];

        let mut redis_conn = conn.connection();
        let result = script.execute(&mut redis_conn, &script_keys, &args).await?;

        match result {
            redis::Value::Int(code) if code < 0 => Err(Error::from_script_code(code)),
            _ => Ok(()),
        }
    }

    /// Move a failed job to delayed queue for retry with backoff.
    #[allow(clippy::too_many_arguments)]
    async fn move_to_delayed_for_retry(
        conn: &RedisConnection,
        keys: &QueueKeys,
        job_id: &str,
        token: &str,
        prefix: &[u8],
        delay: u64,
        opts: &WorkerOptions,
        fields_to_update: &[u8],
    ) -> Result<(), Error> {
        let script = conn
            .scripts()
            .get("moveToDelayed")
            .ok_or_else(|| Error::InvalidConfig("moveToDelayed script not found".to_string()))?
            .clone();

        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;

        let job_key = keys.job_key(job_id);
        let marker = keys.marker();
        let active = keys.active();
        let prioritized = keys.prioritized();
        let delayed = keys.delayed();
        let events = keys.events();
        let meta = keys.meta();
        let stalled = keys.stalled();
        let wait = keys.wait();
        let limiter = keys.limiter();
        let pc = keys.pc();

        let script_keys: Vec<&str> = vec![
            &marker,      // KEYS[1]
            &active,      // KEYS[2]
            &prioritized, // KEYS[3]
            &delayed,     // KEYS[4]
            &job_key,     // KEYS[5]
            &events,      // KEYS[6]
            &meta,        // KEYS[7]
            &stalled,     // KEYS[8]
            &wait,        // KEYS[9]
            &limiter,     // KEYS[10]
            &pc,          // KEYS[11]
        ];

        let prefix_str = std::str::from_utf8(prefix).unwrap_or("");
        let now_str = now.to_string();
        let delay_str = delay.to_string();
        let skip_attempt = b"0"; // Don't skip attempt increment
        let fetch_next = b"0"; // Don't fetch next

        // Pack opts for fetchNextJob (even though we're not fetching, script expects it)
        let move_opts =
            pack_move_to_finished_opts(token, opts, &JobOptions::default(), 0, "failed");

        let args: Vec<&[u8]> = vec![
            prefix_str.as_bytes(), // ARGV[1] key prefix
            now_str.as_bytes(),    // ARGV[2] timestamp
            job_id.as_bytes(),     // ARGV[3] jobId
            token.as_bytes(),      // ARGV[4] queue token
            delay_str.as_bytes(),  // ARGV[5] delay value
            skip_attempt,          // ARGV[6] skip attempt
            fields_to_update,      // ARGV[7] fields to update
            fetch_next,            // ARGV[8] fetch next?
            &move_opts,            // ARGV[9] opts
        ];

        let mut redis_conn = conn.connection();
        let result = script.execute(&mut redis_conn, &script_keys, &args).await?;

        match result {
            redis::Value::Int(code) if code < 0 => Err(Error::from_script_code(code)),
            _ => Ok(()),
        }
    }

    /// Calculate backoff delay for a retry attempt.
    /// Returns delay in ms, or -1 if custom backoff says don't retry.
    async fn calculate_backoff(
        strategy: &crate::types::BackoffStrategy,
        attempt: u32,
        error_msg: &str,
        job_data: &serde_json::Value,
        custom_fn: Option<&crate::options::BackoffStrategyFn>,
    ) -> i64 {
        match strategy {
            crate::types::BackoffStrategy::Fixed(delay) => *delay as i64,
            crate::types::BackoffStrategy::Exponential(base) => {
                (base * 2u64.pow(attempt.saturating_sub(1))) as i64
            }
            crate::types::BackoffStrategy::Custom(type_name) => {
                if let Some(f) = custom_fn {
                    f(attempt, type_name, error_msg, job_data).await
                } else {
                    0
                }
            }
        }
    }

    // ── Private: Fetch Job ───────────────────────────────────────────────

    async fn fetch_next_job(&self, token: &str, block: bool) -> Result<Option<Job>, Error> {
        Self::static_fetch_next_job(
            &self.conn,
            &self.blocking_conn,
            &self.keys,
            token,
            &self.opts,
            block,
        )
        .await
    }

    async fn static_fetch_next_job(
        conn: &RedisConnection,
        blocking_conn: &BlockingRedisConnection,
        keys: &QueueKeys,
        token: &str,
        opts: &WorkerOptions,
        block: bool,
    ) -> Result<Option<Job>, Error> {
        let script = conn
            .scripts()
            .get("moveToActive")
            .ok_or_else(|| Error::InvalidConfig("moveToActive script not found".to_string()))?
            .clone();

        let script_keys = vec![
            keys.wait(),
            keys.active(),
            keys.prioritized(),
            keys.events(),
            keys.stalled(),
            keys.limiter(),
            keys.delayed(),
            keys.paused(),
            keys.meta(),
            keys.pc(),
            keys.marker(),
        ];

        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;

        let opts_packed = pack_move_to_active_opts(token, opts);

        let prefix_bytes = keys.key_prefix().into_bytes();
        let now_bytes = now.to_string().into_bytes();
        let args: Vec<&[u8]> = vec![&prefix_bytes, &now_bytes, &opts_packed];

        let mut redis_conn = conn.connection();
        let result = script.execute(&mut redis_conn, &script_keys, &args).await?;

        // Parse result
        match result {
            redis::Value::Nil => {
                if block {
                    // Wait for marker via BZPOPMIN
                    let marker_key = keys.marker();
                    let wait_result = blocking_conn
                        .managed_bzpopmin(&marker_key, opts.drain_delay as f64)
                        .await?;

                    if wait_result.is_some() {
                        // Retry fetching
                        let mut redis_conn = conn.connection();
                        let retry_result =
                            script.execute(&mut redis_conn, &script_keys, &args).await?;
                        match Self::parse_move_to_active_result(&retry_result)? {
                            FetchResult::Job(job) => Ok(Some(*job)),
                            _ => Ok(None),
                        }
                    } else {
                        Ok(None)
                    }
                } else {
                    Ok(None)
                }
            }
            _ => match Self::parse_move_to_active_result(&result)? {
                FetchResult::Job(job) => Ok(Some(*job)),
                _ => Ok(None),
            },
        }
    }

    /// Parse the result of moveToActive script into a Job.
    fn parse_move_to_active_result(result: &redis::Value) -> Result<FetchResult, Error> {
        match result {
            redis::Value::Nil => Ok(FetchResult::Empty),
            redis::Value::Array(arr) if arr.len() >= 2 => {
                // The result is [HGETALL_data, job_id, expireTime, nextTimestamp]
                // arr[0] = array of field/value pairs from HGETALL
                // arr[1] = job ID (or "0" if no job)
                if let (
                    Some(redis::Value::Array(fields)),
                    Some(redis::Value::BulkString(id_bytes)),
                ) = (arr.first(), arr.get(1))
                {
                    let job_id = String::from_utf8_lossy(id_bytes).to_string();
                    if job_id == "0" || fields.is_empty() {
                        // No job available — check for rate limiting (3rd element)
                        let rate_limit_ttl = Self::extract_element_as_u64(arr, 2);
                        if rate_limit_ttl > 0 {
                            return Ok(FetchResult::RateLimited(rate_limit_ttl));
                        }
                        // Check for next delayed timestamp (4th element)
                        let next_ts = Self::extract_element_as_u64(arr, 3);
                        return if next_ts > 0 {
                            Ok(FetchResult::NextTimestamp(next_ts))
                        } else {
                            Ok(FetchResult::Empty)
                        };
                    }

                    // Parse the HGETALL array directly into a HashMap
                    let mut map = std::collections::HashMap::new();
                    let mut i = 0;
                    while i + 1 < fields.len() {
                        if let (redis::Value::BulkString(k), redis::Value::BulkString(v)) =
                            (&fields[i], &fields[i + 1])
                        {
                            let key = String::from_utf8_lossy(k).to_string();
                            let val = String::from_utf8_lossy(v).to_string();
                            map.insert(key, val);
                        }
                        i += 2;
                    }

                    if map.is_empty() {
                        return Ok(FetchResult::Empty);
                    }

                    Ok(FetchResult::Job(Box::new(Job::from_redis_hash(
                        &job_id, &map,
                    )?)))
                } else {
                    // Check for rate limiting (3rd element)
                    let rate_limit_ttl = Self::extract_element_as_u64(arr, 2);
                    if rate_limit_ttl > 0 {
                        return Ok(FetchResult::RateLimited(rate_limit_ttl));
                    }
                    // Check for nextTimestamp
                    let next_ts = Self::extract_element_as_u64(arr, 3);
                    if next_ts > 0 {
                        Ok(FetchResult::NextTimestamp(next_ts))
                    } else {
                        Ok(FetchResult::Empty)
                    }
                }
            }
            redis::Value::Int(code) if *code < 0 => Err(Error::from_script_code(*code)),
            _ => Ok(FetchResult::Empty),
        }
    }

    /// Extract the next delayed timestamp from a moveToActive result array.
    /// The script returns [data, jobId, expireTime, nextTimestamp].
    /// Extract a u64 value from an array element at the given index.
    fn extract_element_as_u64(arr: &[redis::Value], index: usize) -> u64 {
        if arr.len() > index {
            match &arr[index] {
                redis::Value::Int(v) if *v > 0 => *v as u64,
                redis::Value::BulkString(bs) => {
                    String::from_utf8_lossy(bs).parse::<u64>().unwrap_or(0)
                }
                _ => 0,
            }
        } else {
            0
        }
    }

    // ── Private: Progress Forwarder ──────────────────────────────────────

    async fn start_progress_forwarder(&self) {
        let mut progress_rx = self.progress_tx.subscribe();
        let event_tx = self.event_tx.clone();
        let closing = self.closing.clone();

        tokio::spawn(async move {
            loop {
                if closing.load(Ordering::Relaxed) {
                    break;
                }
                match progress_rx.recv().await {
                    Ok(evt) => {
                        let _ = event_tx.send(WorkerEvent::Progress {
                            job_id: evt.job_id,
                            progress: evt.progress,
                        });
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                }
            }
        });
    }

    // ── Private: Stalled Check ───────────────────────────────────────────

    async fn start_stalled_check(&self) {
        let conn = self.conn.clone();
        let keys = self.keys.clone();
        let closing = self.closing.clone();
        let event_tx = self.event_tx.clone();
        let interval = self.opts.stalled_interval;
        let max_stalled_count = self.opts.max_stalled_count;

        let handle = tokio::spawn(async move {
            let mut ticker = tokio::time::interval(Duration::from_millis(interval));
            ticker.tick().await; // Skip first immediate tick

            loop {
                ticker.tick().await;

                if closing.load(Ordering::Relaxed) {
                    break;
                }

                if let Err(e) =
                    Self::check_stalled_jobs(&conn, &keys, max_stalled_count, interval, &event_tx)
                        .await
                {
                    warn!(error = %e, "stalled check failed");
                }
            }
        });

        *self.stalled_check_handle.lock().await = Some(handle);
    }

    async fn check_stalled_jobs(
        conn: &RedisConnection,
        keys: &QueueKeys,
        max_stalled_count: u32,
        stalled_interval: u64,
        event_tx: &EventSender<WorkerEvent>,
    ) -> Result<(), Error> {
        let script = conn
            .scripts()
            .get("moveStalledJobsToWait")
            .ok_or_else(|| {
                Error::InvalidConfig("moveStalledJobsToWait script not found".to_string())
            })?
            .clone();

        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;

        let script_keys = vec![
            keys.stalled(),
            keys.wait(),
            keys.active(),
            keys.stalled_check(),
            keys.meta(),
            keys.paused(),
            keys.marker(),
            keys.events(),
            keys.repeat(),
        ];

        let max_str = max_stalled_count.to_string().into_bytes();
        let prefix_bytes = keys.key_prefix().into_bytes();
        let now_bytes = now.to_string().into_bytes();
        let max_check_time = stalled_interval.to_string().into_bytes();
        let args: Vec<&[u8]> = vec![&max_str, &prefix_bytes, &now_bytes, &max_check_time];

        let mut redis_conn = conn.connection();
        let result = script.execute(&mut redis_conn, &script_keys, &args).await?;

        // Parse result for stalled job IDs
        if let redis::Value::Array(ref arr) = result {
            if let Some(redis::Value::Array(ref stalled_ids)) = arr.first() {
                for id_val in stalled_ids {
                    if let redis::Value::BulkString(ref id_bytes) = id_val {
                        let job_id = String::from_utf8_lossy(id_bytes).to_string();
                        let _ = event_tx.send(WorkerEvent::Stalled { job_id });
                    }
                }
            }
        }

        Ok(())
    }

    // ── Private: Lock Renewal ────────────────────────────────────────────

    async fn start_lock_renewal(&self) {
        let conn = self.conn.clone();
        let keys = self.keys.clone();
        let closing = self.closing.clone();
        let active_jobs = self.active_jobs.clone();
        let lock_duration = self.opts.lock_duration;
        let renew_time = self.opts.effective_lock_renew_time();

        let handle = tokio::spawn(async move {
            let mut ticker = tokio::time::interval(Duration::from_millis(renew_time));
            ticker.tick().await; // Skip first immediate tick

            loop {
                ticker.tick().await;

                let jobs = active_jobs.read().await;

                // Only stop when closing AND no active jobs remain
                if closing.load(Ordering::Relaxed) && jobs.is_empty() {
                    break;
                }

                if jobs.is_empty() {
                    continue;
                }

                // Extend locks for all active jobs
                let script = match conn.scripts().get("extendLock") {
                    Some(s) => s.clone(),
                    None => continue,
                };

                for active_job in jobs.iter() {
                    let job_key = keys.job_key(&active_job.job_id);
                    let lock_key = format!("{}:lock", job_key);
                    let script_keys = vec![lock_key, keys.stalled()];

                    let token_bytes = active_job.token.as_bytes();
                    let dur_bytes = lock_duration.to_string().into_bytes();
                    let job_id_bytes = active_job.job_id.as_bytes();
                    let args: Vec<&[u8]> = vec![token_bytes, &dur_bytes, job_id_bytes];

                    let mut redis_conn = conn.connection();
                    let _: Result<(), _> = script
                        .execute(&mut redis_conn, &script_keys, &args)
                        .await
                        .map(|_| ())
                        .map_err(|e| {
                            warn!(
                                job_id = %active_job.job_id,
                                error = %e,
                                "lock extension failed"
                            );
                        });
                }
            }
        });

        *self.lock_renew_handle.lock().await = Some(handle);
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.closing.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::{processing_drained, should_convert_discarded_error};
    use crate::error::Error;

    #[test]
    fn discard_preserves_worker_control_flow_errors() {
        assert!(!should_convert_discarded_error(&Error::Delayed));
        assert!(!should_convert_discarded_error(&Error::WaitingChildren));
        assert!(!should_convert_discarded_error(&Error::RateLimited {
            delay_ms: 100,
        }));
        assert!(!should_convert_discarded_error(&Error::JobLockNotExist(
            "j-1".to_string()
        )));
    }

    #[test]
    fn discard_converts_real_failures_to_unrecoverable() {
        assert!(should_convert_discarded_error(&Error::ProcessingError(
            "boom".to_string()
        )));
        assert!(should_convert_discarded_error(&Error::Redis(
            redis::RedisError::from((redis::ErrorKind::Io, "boom"))
        )));
        assert!(!should_convert_discarded_error(&Error::Unrecoverable(
            "fatal".to_string()
        )));
    }

    #[test]
    fn processing_is_not_drained_while_fetcher_is_chaining_next_job() {
        assert!(!processing_drained(0, 1));
        assert!(!processing_drained(1, 0));
        assert!(processing_drained(0, 0));
    }
}
