//! The engine's worker, running our dispatcher: builds `Job<Value>` from the engine's
//! job, maps outcomes back, forwards the engine's events and listens for cancellations.
//!
//! The engine's own lock renewal is off: [`LockKeeper`] renews locks from threads no
//! handler runs on. An attempt whose lock another run took is told to the engine as
//! such (`JobLockNotExist`): the engine then leaves the job to its new owner.

use std::sync::Arc;
use std::time::Duration;

use bullmq::worker::{CancellationToken, WorkerEvent as EngineWorkerEvent};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use tokio::task::JoinHandle;

use super::connection::Connection;
use super::convert::{engine_error, job_meta, keep_to_engine, millis};
use super::flow_gate::{check_parent, ParentGate, CONTINUES_PAST_FAILURES};
use super::job::{JobBoxes, LiveJob};
use super::lock_keeper::{LockHold, LockKeeper, OnRenewed, Timing};
use super::queue::cancel_channel;
use super::raw_data;
use super::sink::{EngineEvent, EventSink};
use crate::error::Error;
use crate::job::batch::{Assembly, Ticket};
use crate::job::{CancelSignal, Job, JobContext, LockLost};
use crate::options::{BackoffContext, BackoffFn, Retention, WorkerOptions};

/// Retry delay after a Redis error in the fetch loop; the engine's default is 15 s,
/// which leaves a worker idle long after Redis is back.
const RUN_RETRY_DELAY: Duration = Duration::from_secs(1);

/// One attempt handed to our dispatcher: the job, with its per-job timeout and trace
/// context read from its stored options.
pub(crate) struct RawAttempt {
    pub(crate) job: Job<serde_json::Value>,
    /// Set when the engine handed over `null` data, which may stand for data that is
    /// missing or not JSON: tells which (a reason), or `None` for a real `null`. Asked
    /// only by handlers whose payload cannot be `null`, so `()` payloads cost nothing.
    pub(crate) explain_null: Option<BoxFuture<'static, Option<String>>>,
    /// Set if the attempt's lock is lost (another run holds the job now): its outcome
    /// then counts for nothing.
    pub(crate) lock_lost: LockLost,
}

/// How an attempt failed, as the engine needs to know it.
#[derive(Debug, Clone)]
pub(crate) struct AttemptFailure {
    pub(crate) reason: String,
    pub(crate) retryable: bool,
    /// The engine will fail the job for good (set by the dispatcher, which decides it
    /// as the engine does).
    pub(crate) is_final: bool,
    /// The attempt was cut off by its timeout.
    pub(crate) timed_out: bool,
    /// What the job's `stacktrace` records of this attempt beyond the reason: the error
    /// chain, or where the handler panicked. The reason alone is recorded without it.
    pub(crate) stack: Option<String>,
}

/// The most of an attempt's stack text a job records, in bytes: an error that carries a
/// whole response body in its chain must not grow the job without bound.
pub(crate) const STACK_TEXT_LIMIT: usize = 8 * 1024;

/// `stack` cut to `limit` bytes on a character boundary, saying so.
pub(crate) fn bounded_stack(mut stack: String, limit: usize) -> String {
    if stack.len() > limit {
        let mut end = limit;
        while !stack.is_char_boundary(end) {
            end -= 1;
        }
        stack.truncate(end);
        stack.push_str(&format!("\n... (cut at {} KiB)", limit / 1024));
    }
    stack
}

/// Our dispatcher: one attempt in, the return value or a failure out.
pub(crate) type ProcessFn = Arc<
    dyn Fn(RawAttempt) -> BoxFuture<'static, Result<serde_json::Value, AttemptFailure>>
        + Send
        + Sync,
>;

/// How often the engine's events are drained while nobody listens and they keep coming:
/// rarely enough not to cost a wake-up per event. A channel that fills a quarter of
/// [`WORKER_EVENT_CAPACITY`] sooner wakes the drain itself. An idle worker's channel is
/// looked at every [`UNHEARD_IDLE_DRAIN_EVERY`].
const UNHEARD_DRAIN_EVERY: Duration = Duration::from_millis(10);
const UNHEARD_IDLE_DRAIN_EVERY: Duration = Duration::from_millis(50);

/// How many engine events may wait for the forwarder; past it they are dropped and
/// counted (`queue_worker_events_dropped_total`). The worker's own bookkeeping does not
/// depend on them.
const WORKER_EVENT_CAPACITY: usize = 1024;

/// What a queue's worker is started with.
pub(crate) struct WorkerSettings {
    pub(crate) queue: String,
    /// The queue's merged worker options (its processors').
    pub(crate) options: WorkerOptions,
    /// How long a Redis call may take (the app's command timeout): lock renewals too.
    pub(crate) command_timeout: Duration,
    pub(crate) backoff: Option<BackoffFn>,
    /// Retention for the finished jobs that set none themselves (BullMQ's worker-level
    /// `removeOnComplete` / `removeOnFail`).
    pub(crate) keep_completed: Retention,
    pub(crate) keep_failed: Retention,
    /// Whether the handler of a job name reads the job's flow children.
    pub(crate) reads_children: ReadsChildren,
    /// Told after each renewal of the running attempts' locks (the liveness probe's
    /// sign that a busy worker is alive).
    pub(crate) on_renewed: OnRenewed,
    /// Told when a batch starts (`true`) and ends (`false`): a batch worker's slots
    /// hold batches, and its pulse counts them (a single job's attempt is counted by
    /// the dispatcher).
    pub(crate) on_batch: OnBatch,
}

/// See [`WorkerSettings::on_batch`].
pub(crate) type OnBatch = Arc<dyn Fn(bool) + Send + Sync>;

/// Whether the handler of a job name reads the job's flow children (takes
/// `ChildResults`): such a job is checked for children still running before it runs.
pub(crate) type ReadsChildren = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// A running engine worker and its helper tasks.
pub(crate) struct EngineWorker {
    queue: String,
    conn: Connection,
    worker: Arc<bullmq::Worker>,
    event_task: JoinHandle<()>,
    cancel_task: JoinHandle<()>,
}

impl std::fmt::Debug for EngineWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineWorker")
            .field("queue", &self.queue)
            .finish()
    }
}

/// A queue that holds groups in the first layout (grouped jobs waiting in BullMQ's
/// `prioritized` too) is moved to this one before its first grouped worker starts
/// (engine change 34); a queue without them costs one `EXISTS`.
async fn migrate_groups(conn: &Connection, queue: &str) -> Result<(), Error> {
    let engine = conn.engine_queue(queue).await?;
    let moved = engine.migrate_groups().await.map_err(|e| Error::Worker {
        queue: queue.to_owned(),
        reason: format!("cannot move its groups to the current layout: {e}"),
    })?;
    if moved {
        tracing::info!(queue, "groups moved to the current layout");
    }
    Ok(())
}

impl EngineWorker {
    pub(crate) async fn start(
        conn: &Connection,
        settings: WorkerSettings,
        process: ProcessFn,
        sink: Arc<dyn EventSink>,
    ) -> Result<Self, Error> {
        let queue = settings.queue.clone();
        let mut options = conn.worker_options();
        let own = &settings.options;
        options.concurrency = own.concurrency;
        options.run_retry_delay = millis(RUN_RETRY_DELAY);
        // Bounded: the forwarder drains it always, but a starved runtime must not
        // grow it without limit (`queue-engine/PATCHES.md`).
        options.event_capacity = Some(own.event_capacity.unwrap_or(WORKER_EVENT_CAPACITY));
        if let Some(lock) = own.lock_duration {
            options.lock_duration = millis(lock);
        }
        if let Some(interval) = own.stalled_interval {
            options.stalled_interval = millis(interval).max(1);
        }
        if let Some(count) = own.max_stalled_count {
            options.max_stalled_count = count;
        }
        if let Some((max, per)) = own.limiter {
            options.limiter = Some(bullmq::RateLimiterOptions::new(max, per));
        }
        options.groups = own.groups.map(super::queue::limits_to_engine);
        if options.groups.is_some() {
            migrate_groups(conn, &queue).await?;
        }
        options.remove_on_complete = Some(keep_to_engine(settings.keep_completed));
        options.remove_on_fail = Some(keep_to_engine(settings.keep_failed));
        if let Some(max_data_points) = own.metrics_data_points {
            options.metrics = Some(bullmq::MetricsOptions { max_data_points });
        }
        if let Some(backoff) = settings.backoff {
            options.backoff_strategy = Some(engine_backoff(backoff));
        }

        // BullMQ's default lock is 30 s; the keeper needs the value the engine uses.
        let lock_duration = Duration::from_millis(options.lock_duration);
        options.skip_lock_renewal = true;
        let timing = Timing::new(lock_duration, settings.command_timeout);
        let keeper =
            LockKeeper::start(conn, &queue, timing, sink.clone(), settings.on_renewed).await?;
        let shared = Arc::new(Shared {
            conn: Arc::new(conn.clone()),
            queue: Arc::from(queue.as_str()),
            process,
            keeper,
            boxes: Arc::default(),
        });
        if let Some(batching) = own.batch {
            options.batch = Some(bullmq::batch::BatchOptions::new(
                batching.size,
                millis(batching.wait),
                batch_processor(
                    shared.clone(),
                    settings.reads_children.clone(),
                    batching.timeout,
                    settings.on_batch.clone(),
                ),
            ));
        }
        let processor = engine_processor(shared, settings.reads_children);
        let worker = bullmq::Worker::with_options(&queue, processor, options)
            .await
            .map_err(|e| Error::Worker {
                queue: queue.clone(),
                reason: engine_error(e).to_string(),
            })?;
        let worker = Arc::new(worker);
        let event_task = tokio::spawn(forward_events(worker.clone(), sink));
        let cancel_task = tokio::spawn(listen_for_cancels(
            conn.clone(),
            queue.clone(),
            worker.clone(),
        ));
        Ok(EngineWorker {
            queue,
            conn: conn.clone(),
            worker,
            event_task,
            cancel_task,
        })
    }

    pub(crate) fn queue(&self) -> &str {
        &self.queue
    }

    /// Stops fetching, waits up to `deadline` for active jobs, then stops.
    /// Returns how many jobs were still active when it gave up.
    pub(crate) async fn close(self, deadline: Duration) -> usize {
        self.cancel_task.abort();
        // An idle engine worker is parked in BZPOPMIN on the queue's marker for up to
        // its drain delay, and `close` waits for it. Once `close` has raised its flag,
        // a marker (what BullMQ's add scripts write) wakes it at once; other workers
        // of the queue just find nothing and park again.
        let marker = format!("{}:marker", self.conn.queue_base(&self.queue));
        let wake = async {
            tokio::task::yield_now().await;
            let mut zadd_cmd = redis::cmd("ZADD");
            zadd_cmd.arg(&marker).arg(0).arg("0");
            let zadd = self.conn.query::<()>(&mut zadd_cmd);
            // Bounded: with Redis down, the command would wait for a reconnect.
            match tokio::time::timeout(Duration::from_secs(1), zadd).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::debug!(queue = %self.queue, error = %e, "could not wake the worker; it stops after its drain delay")
                }
                Err(_) => {
                    tracing::debug!(queue = %self.queue, "Redis did not answer the wake-up; the worker stops after its drain delay")
                }
            }
        };
        let (closed, ()) = tokio::join!(self.worker.close(millis(deadline)), wake);
        drop(closed);
        let still_active = self.worker.active_count().await;
        // The engine sends `Closed` last; the forwarder stops on it. Bound the wait
        // in case the event was lost.
        let _ = tokio::time::timeout(Duration::from_secs(1), self.event_task).await;
        still_active
    }
}

/// Whether a job may be a parent released with children still pending
/// (`flow_gate`): its handler reads its children, or its flow said so.
fn checks_children(reads_children: &ReadsChildren, engine_job: &bullmq::Job) -> bool {
    reads_children(engine_job.name())
        || engine_job.opts().extensions.get(CONTINUES_PAST_FAILURES)
            == Some(&serde_json::Value::Bool(true))
}

/// The engine's processor. `shared`, not copied per job: a connection's clone is
/// several allocations.
fn engine_processor(
    shared: Arc<Shared>,
    reads_children: ReadsChildren,
) -> bullmq::worker::ProcessorFn {
    Arc::new(move |engine_job: bullmq::Job, token: CancellationToken| {
        let shared = shared.clone();
        if checks_children(&reads_children, &engine_job) {
            return Box::pin(async move {
                shared.gate(&engine_job).await?;
                shared.start(engine_job, token, None, None).await
            });
        }
        // The attempt is set up here, synchronously, so that the future the engine
        // boxes per job holds only what the attempt's end needs: a future that held
        // the engine's job across its awaits was big enough for every job's box to
        // take the allocator's slow path.
        shared.start(engine_job, token, None, None)
    })
}

/// The engine's batch processor (#46): each job of the batch is an attempt of its own,
/// set up as a single job's is, with its place in the batch; the batch handler runs
/// once they are all in (`job::batch`). A flow parent the gate stops does not run.
/// Every job's lock is renewed until the whole batch is done: the engine finishes the
/// batch's jobs together, those whose attempt ended early included.
fn batch_processor(
    shared: Arc<Shared>,
    reads_children: ReadsChildren,
    timeout: Option<Duration>,
    on_batch: OnBatch,
) -> bullmq::batch::BatchProcessorFn {
    Arc::new(move |jobs: Vec<(bullmq::Job, CancellationToken)>| {
        let (shared, reads_children, on_batch) =
            (shared.clone(), reads_children.clone(), on_batch.clone());
        Box::pin(async move {
            on_batch(true);
            let holds: BatchHolds = Arc::default();
            let mut outcomes: Vec<Option<Result<serde_json::Value, bullmq::Error>>> =
                jobs.iter().map(|_| None).collect();
            let mut runnable = Vec::with_capacity(jobs.len());
            for (at, (engine_job, token)) in jobs.into_iter().enumerate() {
                if checks_children(&reads_children, &engine_job) {
                    if let Err(stopped) = shared.gate(&engine_job).await {
                        if let Some(lock_token) = engine_job.token() {
                            let meta = Arc::new(job_meta(&engine_job, &shared.queue));
                            let hold =
                                shared
                                    .keeper
                                    .hold(meta, lock_token, token, LockLost::default());
                            lock_holds(&holds).push(hold);
                        }
                        outcomes[at] = Some(Err(stopped));
                        continue;
                    }
                }
                runnable.push((at, engine_job, token));
            }
            let tickets = Assembly::tickets(runnable.len(), timeout);
            let attempts =
                runnable
                    .into_iter()
                    .zip(tickets)
                    .map(|((at, engine_job, token), ticket)| {
                        shared
                            .start(engine_job, token, Some(ticket), Some(holds.clone()))
                            .map(move |outcome| (at, outcome))
                    });
            for (at, outcome) in futures::future::join_all(attempts).await {
                outcomes[at] = Some(outcome);
            }
            // Renewed until here; the engine's finish follows at once.
            drop(holds);
            on_batch(false);
            outcomes
                .into_iter()
                .map(|outcome| {
                    outcome.unwrap_or_else(|| {
                        Err(bullmq::Error::ProcessingError(
                            "the batch gave this job no outcome".to_owned(),
                        ))
                    })
                })
                .collect()
        })
    })
}

/// What every attempt of one engine worker shares.
struct Shared {
    conn: Arc<Connection>,
    queue: Arc<str>,
    process: ProcessFn,
    keeper: LockKeeper,
    /// Where the running attempts' engine jobs are kept.
    boxes: Arc<JobBoxes>,
}

impl Shared {
    /// Whether a flow parent may run now (`flow_gate`); `Err` is how the engine is told
    /// otherwise.
    async fn gate(&self, engine_job: &bullmq::Job) -> Result<(), bullmq::Error> {
        match check_parent(&self.conn, &self.queue, engine_job).await {
            Ok(ParentGate::Run) => Ok(()),
            // Not run, and no attempt spent: the engine leaves the job where it is now.
            Ok(ParentGate::BackToWaitingChildren) => Err(bullmq::Error::WaitingChildren),
            Ok(ParentGate::Fail(reason)) => Err(bullmq::Error::Unrecoverable(reason)),
            Err(e) => {
                tracing::warn!(queue = %self.queue, job_id = engine_job.id(), error = %e, "could not check the parent's children; the attempt fails");
                Err(bullmq::Error::ProcessingError(format!(
                    "could not check the flow's children before running: {e}"
                )))
            }
        }
    }

    /// Hands the job to our dispatcher; the future ends the attempt as the engine
    /// needs it ended.
    fn start(
        &self,
        mut engine_job: bullmq::Job,
        token: CancellationToken,
        batch: Option<Ticket>,
        batch_holds: Option<BatchHolds>,
    ) -> BoxFuture<'static, Result<serde_json::Value, bullmq::Error>> {
        let lock_lost = LockLost::default();
        // Everything the attempt needs came with the job: its timeout and trace
        // context are in its stored options.
        let meta = Arc::new(job_meta(&engine_job, &self.queue));
        let hold = engine_job.token().map(|lock_token| {
            self.keeper
                .hold(meta.clone(), lock_token, token.clone(), lock_lost.clone())
        });
        // Moved, not copied: the engine keeps its own copy for after the attempt,
        // and the job handed to `LiveJob` needs no payload.
        let data = engine_job.take_data();
        let explain_null = data.is_null().then(|| {
            let (conn, queue, meta) = (self.conn.clone(), self.queue.clone(), meta.clone());
            let explain: BoxFuture<'static, Option<String>> =
                Box::pin(async move { raw_data::problem(&conn, &queue, &meta.id).await });
            explain
        });
        let ctx = JobContext::Live(Arc::new(LiveJob::new(
            engine_job,
            self.queue.clone(),
            self.conn.clone(),
            self.boxes.clone(),
        )));
        let job = Job::from_parts(
            data,
            meta.clone(),
            ctx,
            CancelSignal::from_source(Arc::new(token)),
        );
        let job = match batch {
            Some(ticket) => job.in_batch(ticket),
            None => job,
        };
        let running = (self.process)(RawAttempt {
            job,
            explain_null,
            lock_lost: lock_lost.clone(),
        });
        Box::pin(async move {
            let outcome = running.await;
            // A batch's job keeps its lock renewed until the batch ends.
            match (batch_holds, hold) {
                (Some(holds), Some(hold)) => lock_holds(&holds).push(hold),
                (_, hold) => drop(hold),
            }
            if lock_lost.is_set() {
                // The job is another run's: the engine leaves it alone, rather than
                // have its move refused ("lock mismatch") and report a failure.
                return Err(bullmq::Error::JobLockNotExist(meta.id.clone()));
            }
            outcome.map_err(|failure| {
                let error = if failure.retryable {
                    bullmq::Error::ProcessingError(failure.reason)
                } else {
                    bullmq::Error::Unrecoverable(failure.reason)
                };
                match failure.stack {
                    Some(stack) => error.with_stacktrace(bounded_stack(stack, STACK_TEXT_LIMIT)),
                    None => error,
                }
            })
        })
    }
}

/// The lock holds of a batch's jobs, kept until the batch ends.
type BatchHolds = Arc<std::sync::Mutex<Vec<LockHold>>>;

fn lock_holds(holds: &BatchHolds) -> std::sync::MutexGuard<'_, Vec<LockHold>> {
    holds
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn engine_backoff(backoff: BackoffFn) -> bullmq::BackoffStrategyFn {
    Arc::new(move |attempt, name, reason, data| {
        let ctx = BackoffContext {
            attempt,
            reason,
            data,
        };
        // -1 tells the engine not to retry.
        let wait =
            backoff(name, &ctx).map_or(-1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Box::pin(std::future::ready(wait))
    })
}

/// The engine's event channel is bounded (`queue-engine/PATCHES.md`), but events left in it
/// would be stale by the time someone listens: drain it always. While nobody listens,
/// drain it in batches instead of waking for every event: that wake-up per job cost
/// measurable throughput. Events the channel dropped are counted and passed on.
async fn forward_events(worker: Arc<bullmq::Worker>, sink: Arc<dyn EventSink>) {
    let mut dropped = 0;
    // Whether the last look found events, and whether the task has yielded since the
    // last event it read (see below).
    let (mut busy, mut yielded) = (false, false);
    loop {
        let now_dropped = worker.dropped_events();
        if now_dropped > dropped {
            sink.deliver(EngineEvent::Dropped {
                count: now_dropped - dropped,
            });
            dropped = now_dropped;
        }
        let next = if sink.listening() {
            worker.next_event().await
        } else if let Some(ready) = worker.next_event().now_or_never() {
            (busy, yielded) = (true, false);
            ready
        } else if !yielded {
            // `None` may only mean that tokio's cooperative budget (128 reads a turn) is
            // spent: a new turn tells an empty channel from that. Without it the
            // batches were cut at 128 events, and the channel overflowed at full speed.
            tokio::task::yield_now().await;
            yielded = true;
            continue;
        } else {
            let pause = if busy {
                UNHEARD_DRAIN_EVERY
            } else {
                UNHEARD_IDLE_DRAIN_EVERY
            };
            busy = false;
            // The timer alone fell behind a fast worker on a busy machine (a 10 ms
            // pause held up is 1,024 events at 20 k jobs/s): a channel a quarter full
            // wakes the drain early.
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = worker.events_filling() => {}
            }
            continue;
        };
        let Some(event) = next else { break };
        let converted = match event {
            EngineWorkerEvent::Closed => break,
            EngineWorkerEvent::Completed { job_id, result } => {
                EngineEvent::Completed { job_id, result }
            }
            EngineWorkerEvent::Failed { job_id, error } => EngineEvent::Failed {
                job_id,
                reason: error,
            },
            EngineWorkerEvent::Progress { job_id, progress } => EngineEvent::Progress {
                job_id,
                progress: serde_json::to_value(progress).unwrap_or_default(),
            },
            EngineWorkerEvent::Stalled { job_id } => EngineEvent::Stalled { job_id },
            EngineWorkerEvent::Drained => EngineEvent::Drained,
            EngineWorkerEvent::Error(message) => EngineEvent::Error { message },
            // Our dispatcher publishes a richer `Active` itself.
            EngineWorkerEvent::Active { .. }
            | EngineWorkerEvent::Ready
            | EngineWorkerEvent::Paused
            | EngineWorkerEvent::Resumed => continue,
        };
        sink.deliver(converted);
    }
}

/// Cancellations arrive over pub/sub from any process; a lost subscription is
/// re-established after a short pause.
async fn listen_for_cancels(conn: Connection, queue: String, worker: Arc<bullmq::Worker>) {
    let channel = cancel_channel(&conn, &queue);
    let outage = crate::outage::OutageLog::new("the cancellation listener", &queue);
    loop {
        match conn.client_for(&channel).await.get_async_pubsub().await {
            Ok(mut pubsub) => {
                if let Err(e) = pubsub.subscribe(&channel).await {
                    outage.failed(&e);
                } else {
                    outage.succeeded();
                    let mut messages = pubsub.on_message();
                    while let Some(message) = messages.next().await {
                        let Ok(job_id) = message.get_payload::<String>() else {
                            continue;
                        };
                        if worker.cancel_job(&job_id).await {
                            tracing::info!(queue = %queue, job_id = %job_id, "cancellation delivered to the running job");
                        }
                    }
                }
            }
            Err(e) => outage.failed(&e),
        }
        tokio::time::sleep(RUN_RETRY_DELAY).await;
    }
}
