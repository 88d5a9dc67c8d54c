//! Our framework, used as a user would: macro-registered typed processors, `Queue<T>`,
//! and a queue-axum endpoint.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::{Json, Router};
use futures::stream::{self, StreamExt, TryStreamExt};
use queue_axum::{Accepted, QueueError, QueueLayer};
use queue_core::app::{QueueAppBuilder, Registrations};
use queue_core::encryption::Keyring;
use queue_core::worker::{Batch, BatchResult};
use queue_core::{
    inject_queue, processor, queue::BulkJob, Job, JobError, JobOptions, Processor, Queue, QueueApp,
    Retention,
};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::{now_us, redis_url, Email, Letter, Stamp, StartCounter, IN_FLIGHT};
use crate::BenchResult;

static STARTS: StartCounter = StartCounter::new();

// One queue per concurrency: the macro takes the concurrency as a literal.
#[processor("bench-c1", concurrency = 1)]
async fn noop_c1(_job: Job<Email>) -> Result<(), JobError> {
    STARTS.mark();
    Ok(())
}

#[processor("bench-c10", concurrency = 10)]
async fn noop_c10(_job: Job<Email>) -> Result<(), JobError> {
    STARTS.mark();
    Ok(())
}

#[processor("bench-c100", concurrency = 100)]
async fn noop_c100(_job: Job<Email>) -> Result<(), JobError> {
    STARTS.mark();
    Ok(())
}

/// One millisecond of a real job's waiting (an I/O call), for the observability suite:
/// a no-op handler makes any per-job cost look large.
async fn one_millisecond_of_work() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

#[processor("bench-w1", concurrency = 1)]
async fn work_c1(_job: Job<Email>) -> Result<(), JobError> {
    STARTS.mark();
    one_millisecond_of_work().await;
    Ok(())
}

#[processor("bench-w10", concurrency = 10)]
async fn work_c10(_job: Job<Email>) -> Result<(), JobError> {
    STARTS.mark();
    one_millisecond_of_work().await;
    Ok(())
}

#[processor("bench-w100", concurrency = 100)]
async fn work_c100(_job: Job<Email>) -> Result<(), JobError> {
    STARTS.mark();
    one_millisecond_of_work().await;
    Ok(())
}

#[processor("bench-p1", concurrency = 1)]
async fn checksum_c1(_job: Job<Email>) -> Result<(), JobError> {
    STARTS.mark();
    checksum()
}

#[processor("bench-p10", concurrency = 10)]
async fn checksum_c10(_job: Job<Email>) -> Result<(), JobError> {
    STARTS.mark();
    checksum()
}

#[processor("bench-p100", concurrency = 100)]
async fn checksum_c100(_job: Job<Email>) -> Result<(), JobError> {
    STARTS.mark();
    checksum()
}

/// The CPU handlers' job: the runner's checksum work, checked, as a real job would use
/// its result.
fn checksum() -> Result<(), JobError> {
    let work = super::CpuWork::current();
    if super::checksum(work.passes) == work.checksum {
        Ok(())
    } else {
        Err(JobError::unrecoverable("the checksum came out wrong"))
    }
}

/// The encryption suite's queues (`runner/encryption.rs`): their jobs are 1 KB
/// [`Letter`]s, added by [`enqueue`] as well, sealed or not as the app is told.
pub(super) const LETTER_QUEUES: &str = "bench-1k-";

/// What a letter's handler returns: small, and sealed too on a queue that seals.
#[derive(Debug, Serialize, Deserialize)]
struct Receipt {
    id: u64,
    chars: usize,
}

impl Receipt {
    /// The letter read, as a real handler reads its payload.
    fn of(letter: &Letter) -> Self {
        Receipt {
            id: letter.id,
            chars: letter.body.len() + letter.subject.len(),
        }
    }
}

#[processor("bench-1k-c10", concurrency = 10)]
async fn letter_c10(job: Job<Letter>) -> Result<Receipt, JobError> {
    STARTS.mark();
    Ok(Receipt::of(&job.data))
}

#[processor("bench-1k-c100", concurrency = 100)]
async fn letter_c100(job: Job<Letter>) -> Result<Receipt, JobError> {
    STARTS.mark();
    Ok(Receipt::of(&job.data))
}

/// BullMQ's worker scenarios (`super::scenarios`), each on a queue of its own.
static SCENARIO_STARTS: super::scenarios::WorkerClock = super::scenarios::WorkerClock::new();

#[processor("bench-worker-generic", concurrency = 1)]
async fn scenario_c1(_job: Job<serde_json::Value>) -> Result<serde_json::Value, JobError> {
    SCENARIO_STARTS.mark(super::scenarios::WARMUP);
    Ok(super::scenarios::result())
}

#[processor("bench-worker-concurrent", concurrency = 100)]
async fn scenario_c100(_job: Job<serde_json::Value>) -> Result<serde_json::Value, JobError> {
    SCENARIO_STARTS.mark(super::scenarios::WARMUP);
    Ok(super::scenarios::result())
}

/// One of BullMQ's scenarios (`super::scenarios`); answers its timed window.
pub(super) async fn scenario(scenario: super::scenarios::Scenario) -> BenchResult<Duration> {
    let queue = scenario.queue();
    let mut builder = QueueApp::builder().redis(redis_url());
    if scenario.concurrency.is_some() {
        // Completed jobs are kept, as by bullmq-bench's workers (set on the worker
        // scenarios only: an add scenario's jobs carry no option raw's and Node's lack).
        builder = builder.default_job_options(JobOptions::new().remove_on_complete(Retention::All));
    }
    let app = builder.build().await?;
    let q = app.queue::<serde_json::Value>(&queue)?;
    let add_many = |batch: Vec<serde_json::Value>| {
        let q = q.clone();
        async move {
            let jobs = batch.into_iter().map(|d| BulkJob::new("test", d)).collect();
            q.add_bulk(jobs).await?;
            Ok(())
        }
    };
    if scenario.concurrency.is_none() {
        let add_one = |data| {
            let q = q.clone();
            async move {
                q.add("test", data, JobOptions::new()).await?;
                Ok(())
            }
        };
        return super::scenarios::time_adds(scenario, add_one, add_many).await;
    }
    for batch in super::scenarios::setup_batches(scenario) {
        add_many(batch).await?;
    }
    let workers = app.start_workers_for(&[queue.as_str()]).await?;
    let window = SCENARIO_STARTS.window(scenario).await?;
    workers.shutdown(Duration::from_secs(5)).await;
    Ok(window)
}

/// Where the latency handler reports (sent, started) to the producer loop.
static LATENCY: OnceLock<mpsc::UnboundedSender<(u64, u64)>> = OnceLock::new();

#[processor("bench-latency")]
async fn ping(job: Job<Stamp>) -> Result<(), JobError> {
    let started = now_us();
    if let Some(report) = LATENCY.get() {
        let _ = report.send((job.data.sent_us, started));
    }
    Ok(())
}

async fn app() -> BenchResult<QueueApp> {
    Ok(QueueApp::builder().redis(redis_url()).build().await?)
}

/// The app's builder; when `sealed`, with a keyring, and `queue`'s payloads sealed (the
/// encryption suite's "on").
fn builder(queue: &str, sealed: bool) -> BenchResult<QueueAppBuilder> {
    let builder = QueueApp::builder().redis(redis_url());
    if !sealed {
        return Ok(builder);
    }
    Ok(builder
        .keyring(Keyring::new("bench", [7; 32])?)
        .external_queue(queue)
        .encrypt_queue(queue))
}

/// An enqueue run: `n` adds, the time they took and the process's CPU time over them,
/// ms. Emails, or on [`LETTER_QUEUES`] letters, sealed when `sealed`.
pub(super) async fn enqueue(
    queue: &str,
    mode: &str,
    n: u64,
    sealed: bool,
) -> BenchResult<(Duration, f64)> {
    let app = builder(queue, sealed)?.build().await?;
    if queue.starts_with(LETTER_QUEUES) {
        add_all(&app.queue(queue)?, "letter", mode, n, Letter::numbered).await
    } else {
        add_all(&app.queue(queue)?, "email", mode, n, Email::numbered).await
    }
}

/// `make(0)` to `make(n - 1)` added to `q` as `mode` says (`single`, `inflight`,
/// `bulk100`: `add_bulk` of 100 at a time, or else `bulk`: of 1,000).
async fn add_all<T>(
    q: &Queue<T>,
    name: &str,
    mode: &str,
    n: u64,
    make: fn(u64) -> T,
) -> BenchResult<(Duration, f64)>
where
    T: Serialize + Send + Sync + 'static,
{
    let cpu_before = super::cpu_ms();
    let started = Instant::now();
    match mode {
        "single" => {
            for i in 0..n {
                q.add(name, make(i), JobOptions::new()).await?;
            }
        }
        "inflight" => {
            stream::iter(0..n)
                .map(|i| q.add(name, make(i), JobOptions::new()))
                .buffer_unordered(IN_FLIGHT)
                .try_collect::<Vec<_>>()
                .await?;
        }
        _ => {
            let size = match mode {
                "bulk100" => super::BULK_SMALL,
                _ => super::BULK,
            };
            for batch in super::chunks(n, size, make) {
                let jobs = batch.into_iter().map(|e| BulkJob::new(name, e)).collect();
                q.add_bulk(jobs).await?;
            }
        }
    }
    Ok((started.elapsed(), super::cpu_ms() - cpu_before))
}

/// Processes `n` jobs; when `observed` (the share of traces sampled), under metrics and
/// OpenTelemetry traces; when `sealed`, opening sealed payloads and sealing what the
/// handler returns. Returns the time, and the spans exported.
pub(super) async fn work(
    queue: &str,
    n: u64,
    observed: Option<f64>,
    sealed: bool,
) -> BenchResult<(super::Timed, u64)> {
    // A wrong checksum would fail every CPU job and leave the run waiting: say so now.
    let cpu = super::CpuWork::current();
    if super::checksum(cpu.passes) != cpu.checksum {
        return Err(format!("{cpu:?}: the CPU handler computes another checksum").into());
    }
    let observed = observed
        .map(super::observed::Observed::install)
        .transpose()?;
    // The run ends when all `n` jobs are in the completed set, so keep them all, as the
    // raw engine's and Node's workers do by default.
    let mut builder = builder(queue, sealed)?
        .default_job_options(JobOptions::new().remove_on_complete(Retention::All));
    if let Some(observed) = &observed {
        builder = builder.metrics(observed.metrics.clone());
    }
    let created = std::time::Instant::now();
    let app = builder.build().await?;
    let workers = app.start_workers_for(&[queue]).await?;
    let timed = super::time_until_completed(&STARTS, queue, n, created).await?;
    workers.shutdown(Duration::from_secs(5)).await;
    let spans = match observed {
        Some(observed) => observed.finish()?,
        None => 0,
    };
    Ok((timed, spans))
}

/// Processes `n` waiting emails of `queue` in batches, as a user writes a batch
/// handler: `Processor::batch` with a typed `Batch<Email>`, every job completed.
pub(super) async fn batch_work(
    queue: &str,
    batching: super::Batching,
    n: u64,
) -> BenchResult<super::Timed> {
    let sleep = batching.sleep;
    let handler = move |batch: Batch<Email>| async move {
        STARTS.mark_many(batch.len());
        if !sleep.is_zero() {
            tokio::time::sleep(sleep).await;
        }
        Ok(BatchResult::new())
    };
    let processor = Processor::new(queue)
        .concurrency(batching.concurrency)
        .batch(
            batching.size,
            Duration::from_millis(super::Batching::WAIT_MS),
            handler,
        );
    // As `work`: every completed job kept, the run ending when all `n` are in the set.
    let created = Instant::now();
    let app = builder(queue, false)?
        .default_job_options(JobOptions::new().remove_on_complete(Retention::All))
        .registrations(Registrations::None)
        .processor(processor)
        .build()
        .await?;
    let workers = app.start_workers_for(&[queue]).await?;
    let timed = super::time_until_completed(&STARTS, queue, n, created).await?;
    workers.shutdown(Duration::from_secs(5)).await;
    Ok(timed)
}

pub(super) async fn latency(queue: &str, n: u64) -> BenchResult<Vec<u64>> {
    let (report, mut reports) = mpsc::unbounded_channel();
    LATENCY
        .set(report)
        .map_err(|_| "the latency channel is set twice")?;
    let app = app().await?;
    let q = app.queue::<Stamp>(queue)?;
    let workers = app.start_workers_for(&[queue]).await?;
    let mut samples = Vec::with_capacity(usize::try_from(n)?);
    for _ in 0..n {
        q.add("ping", Stamp { sent_us: now_us() }, JobOptions::new())
            .await?;
        let (sent, started) = reports.recv().await.ok_or("the handler stopped")?;
        samples.push(started.saturating_sub(sent));
    }
    workers.shutdown(Duration::from_secs(5)).await;
    Ok(samples)
}

/// The producers the endpoint gets from the request.
#[inject_queue(axum)]
#[derive(Debug)]
struct Producers {
    #[queue("bench-http")]
    email: Queue<Email>,
}

async fn accept(producers: Producers, Json(email): Json<Email>) -> Result<Accepted, QueueError> {
    let added = producers
        .email
        .add("email", email, JobOptions::new())
        .await?;
    Ok(Accepted::from(added))
}

pub(super) async fn serve(port: u16, start_traces: bool) -> BenchResult<()> {
    let app = app().await?;
    let router = Router::new()
        .route("/enqueue", post(accept))
        .layer(QueueLayer::new(&app).start_traces(start_traces));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    axum::serve(listener, router).await?;
    Ok(())
}
