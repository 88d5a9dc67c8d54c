//! The raw engine (`queue-engine`, BullMQ's port with our patches) used directly, as the
//! baseline our layer must not fall far behind.

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use bullmq::batch::{BatchOptions, BatchProcessorFn};
use bullmq::options::RedisConnectionOptions;
use bullmq::{BulkJob, Queue, QueueOptions, Worker, WorkerOptions};
use futures::stream::{self, StreamExt, TryStreamExt};
use tokio::sync::mpsc;

use super::{now_us, redis_url, Email, Stamp, StartCounter, IN_FLIGHT};
use crate::BenchResult;

static STARTS: StartCounter = StartCounter::new();

/// How long `close` may wait for the worker to drain, ms. Every job is done when a run
/// closes it, but its fetcher sits in a blocking `BZPOPMIN` for the engine's 5 s drain
/// delay, and a graceful close waits that out: 5 s of nothing per run (more than a
/// paired round's measurement). The run is timed by then, so close at once.
const CLOSE_MS: u64 = 0;

fn connection() -> RedisConnectionOptions {
    RedisConnectionOptions::new().url(redis_url())
}

async fn queue(name: &str) -> BenchResult<Queue> {
    let options = QueueOptions::new().connection(connection());
    Ok(Queue::with_options(name, options).await?)
}

pub(super) async fn enqueue(name: &str, mode: &str, n: u64) -> BenchResult<Duration> {
    let q = queue(name).await?;
    let started = Instant::now();
    match mode {
        "single" => {
            for i in 0..n {
                q.add("email", Email::numbered(i)).await?;
            }
        }
        "inflight" => {
            stream::iter(0..n)
                .map(|i| q.add("email", Email::numbered(i)).into_future())
                .buffer_unordered(IN_FLIGHT)
                .try_collect::<Vec<_>>()
                .await?;
        }
        _ => {
            for batch in super::batches(n, Email::numbered) {
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

pub(super) async fn work(name: &str, concurrency: usize, n: u64) -> BenchResult<super::Timed> {
    let options = WorkerOptions {
        connection: connection(),
        concurrency,
        ..Default::default()
    };
    // The observability suite's handlers, picked by queue as ours are (`bench-w<c>`
    // waits 1 ms, `bench-p<c>` does the CPU work): the raw engine's row beside ours.
    let handler = Handler::of(name);
    let cpu = super::CpuWork::current();
    let created = std::time::Instant::now();
    let worker = Worker::with_options(
        name,
        move |_job: bullmq::Job, _token| async move {
            STARTS.mark();
            match handler {
                Handler::NoOp => {}
                Handler::Waits => tokio::time::sleep(Duration::from_millis(1)).await,
                Handler::Cpu if super::checksum(cpu.passes) != cpu.checksum => {
                    return Err(bullmq::Error::Unrecoverable(
                        "the checksum came out wrong".into(),
                    ));
                }
                Handler::Cpu => {}
            }
            Ok(serde_json::Value::Null)
        },
        options,
    )
    .await?;
    let timed = super::time_until_completed(&STARTS, name, n, created).await?;
    worker.close(CLOSE_MS).await?;
    Ok(timed)
}

/// Processes `n` waiting jobs of `name` with the engine's batch worker
/// (`WorkerOptions::batch`), every job completed with a null result.
pub(super) async fn batch_work(
    name: &str,
    batching: super::Batching,
    n: u64,
) -> BenchResult<super::Timed> {
    let sleep = batching.sleep;
    let processor: BatchProcessorFn = Arc::new(move |jobs| {
        Box::pin(async move {
            STARTS.mark_many(jobs.len());
            if !sleep.is_zero() {
                tokio::time::sleep(sleep).await;
            }
            jobs.iter().map(|_| Ok(serde_json::Value::Null)).collect()
        })
    });
    let options = WorkerOptions {
        connection: connection(),
        concurrency: batching.concurrency,
        batch: Some(BatchOptions::new(
            batching.size,
            super::Batching::WAIT_MS,
            processor,
        )),
        ..Default::default()
    };
    let created = Instant::now();
    let worker = Worker::with_options(name, BatchOptions::unused_processor(), options).await?;
    let timed = super::time_until_completed(&STARTS, name, n, created).await?;
    worker.close(CLOSE_MS).await?;
    Ok(timed)
}

/// What a raw worker's handler does, by its queue's name: the prefixes of the
/// observability suite's handlers (`runner/observability.rs`, `HANDLERS`), on which our
/// probe registers its `#[processor]`s of the same work.
#[derive(Debug, Clone, Copy)]
enum Handler {
    NoOp,
    Waits,
    Cpu,
}

impl Handler {
    fn of(queue: &str) -> Self {
        if queue.starts_with("bench-w") {
            Handler::Waits
        } else if queue.starts_with("bench-p") {
            Handler::Cpu
        } else {
            Handler::NoOp
        }
    }
}

/// One of BullMQ's scenarios (`super::scenarios`); answers its timed window.
pub(super) async fn scenario(scenario: super::scenarios::Scenario) -> BenchResult<Duration> {
    static STARTS: super::scenarios::WorkerClock = super::scenarios::WorkerClock::new();
    let name = scenario.queue();
    let q = Arc::new(queue(&name).await?);
    let add_many = |batch: Vec<serde_json::Value>| {
        let q = Arc::clone(&q);
        async move {
            let jobs = batch.into_iter().map(|d| BulkJob::new("test", d)).collect();
            q.add_bulk(jobs).await?;
            Ok(())
        }
    };
    let Some(concurrency) = scenario.concurrency else {
        let add_one = |data: serde_json::Value| {
            let q = Arc::clone(&q);
            async move {
                q.add("test", data).await?;
                Ok(())
            }
        };
        return super::scenarios::time_adds(scenario, add_one, add_many).await;
    };
    for batch in super::scenarios::setup_batches(scenario) {
        add_many(batch).await?;
    }
    let options = WorkerOptions {
        connection: connection(),
        concurrency,
        ..Default::default()
    };
    let worker = Worker::with_options(
        &name,
        move |_job: bullmq::Job, _token| async move {
            STARTS.mark(scenario.warmup);
            Ok(super::scenarios::result())
        },
        options,
    )
    .await?;
    let window = STARTS.window(scenario).await?;
    worker.close(CLOSE_MS).await?;
    Ok(window)
}

pub(super) async fn latency(name: &str, n: u64) -> BenchResult<Vec<u64>> {
    let (report, mut reports) = mpsc::unbounded_channel::<(u64, u64)>();
    let options = WorkerOptions {
        connection: connection(),
        ..Default::default()
    };
    let worker = Worker::with_options(
        name,
        move |job: bullmq::Job, _token| {
            let started = now_us();
            let sent = serde_json::from_value::<Stamp>(job.data().clone()).map_or(0, |s| s.sent_us);
            let _ = report.send((sent, started));
            async { Ok(serde_json::Value::Null) }
        },
        options,
    )
    .await?;
    let q = queue(name).await?;
    let mut samples = Vec::with_capacity(usize::try_from(n)?);
    for _ in 0..n {
        q.add("ping", Stamp { sent_us: now_us() }).await?;
        let (sent, started) = reports.recv().await.ok_or("the handler stopped")?;
        samples.push(started.saturating_sub(sent));
    }
    worker.close(CLOSE_MS).await?;
    Ok(samples)
}

/// The bare endpoints' answer: 202 with the job's id.
fn accepted(job: &bullmq::Job) -> (StatusCode, Json<serde_json::Value>) {
    (
        StatusCode::ACCEPTED,
        Json(serde_json::json!({ "jobId": job.id() })),
    )
}

async fn accept(
    State(queue): State<Arc<Queue>>,
    Json(email): Json<Email>,
) -> Result<(StatusCode, Json<serde_json::Value>), StatusCode> {
    let job = queue
        .add("email", email)
        .await
        .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    Ok(accepted(&job))
}

/// The bare endpoint carrying a trace to the worker and nothing else: a new W3C context
/// per request, stored as BullMQ's telemetry field (`{"traceparent":"00-…-01"}` in `tm`,
/// which Node's `bullmq-otel` reads): about the least any producer pays for a traced job.
/// Its ids come from our `TraceContext`, so that the two traced endpoints make them alike
/// and differ in everything else.
async fn accept_traced(
    State(queue): State<Arc<Queue>>,
    Json(email): Json<Email>,
) -> Result<(StatusCode, Json<serde_json::Value>), StatusCode> {
    let traceparent = queue_core::trace::TraceContext::new_root().traceparent();
    let mut metadata = String::with_capacity(traceparent.len() + 18);
    metadata.push_str(r#"{"traceparent":""#);
    metadata.push_str(&traceparent);
    metadata.push_str(r#""}"#);
    let job = queue
        .add("email", email)
        .options(bullmq::JobOptions::new().telemetry_metadata(metadata))
        .await
        .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    Ok(accepted(&job))
}

/// Serves `POST /enqueue`; `traced`: with a trace context in each job ([`accept_traced`]).
pub(super) async fn serve(port: u16, traced: bool) -> BenchResult<()> {
    let q = Arc::new(queue("bench-http").await?);
    let route = if traced {
        post(accept_traced)
    } else {
        post(accept)
    };
    let router = Router::new().route("/enqueue", route).with_state(q);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    axum::serve(listener, router).await?;
    Ok(())
}
