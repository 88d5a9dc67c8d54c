//! Our framework, used as a user would: macro-registered typed processors, `Queue<T>`,
//! and a queue-axum endpoint.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::{Json, Router};
use futures::stream::{self, StreamExt, TryStreamExt};
use queue_axum::{Accepted, QueueError, QueueLayer};
use queue_core::{
    inject_queue, processor, queue::BulkJob, Job, JobError, JobOptions, Queue, QueueApp, Retention,
};
use tokio::sync::mpsc;

use super::{now_us, redis_url, Email, Stamp, StartCounter, IN_FLIGHT};
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

pub(super) async fn enqueue(queue: &str, mode: &str, n: u64) -> BenchResult<Duration> {
    let app = app().await?;
    let q = app.queue::<Email>(queue)?;
    let started = Instant::now();
    match mode {
        "single" => {
            for i in 0..n {
                q.add("email", Email::numbered(i), JobOptions::new())
                    .await?;
            }
        }
        "inflight" => {
            stream::iter(0..n)
                .map(|i| q.add("email", Email::numbered(i), JobOptions::new()))
                .buffer_unordered(IN_FLIGHT)
                .try_collect::<Vec<_>>()
                .await?;
        }
        _ => {
            for batch in super::batches(n) {
                let jobs = batch
                    .into_iter()
                    .map(|e| BulkJob::new("email", e))
                    .collect();
                q.add_bulk(jobs).await?;
            }
        }
    }
    Ok(started.elapsed())
}

/// Processes `n` jobs; when `observed` (the share of traces sampled), under metrics and
/// OpenTelemetry traces. Returns the time, and the spans exported.
pub(super) async fn work(
    queue: &str,
    n: u64,
    observed: Option<f64>,
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
    let mut builder = QueueApp::builder()
        .redis(redis_url())
        .default_job_options(JobOptions::new().remove_on_complete(Retention::All));
    if let Some(observed) = &observed {
        builder = builder.metrics(observed.metrics.clone());
    }
    let app = builder.build().await?;
    let workers = app.start_workers_for(&[queue]).await?;
    let timed = super::time_until_completed(&STARTS, queue, n).await?;
    workers.shutdown(Duration::from_secs(5)).await;
    let spans = match observed {
        Some(observed) => observed.finish()?,
        None => 0,
    };
    Ok((timed, spans))
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
