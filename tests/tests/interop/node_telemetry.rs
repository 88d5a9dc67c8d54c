//! What a job carries besides BullMQ's own options, against the real Node `bullmq` 5.x
//! with `bullmq-otel` 1.x and 6.x with `bullmq-otel` 2.x (pinned in tests/node): the trace
//! context in BullMQ's telemetry field, both directions, down to which span is whose
//! parent, and the per-job timeout, which a Node retry keeps. Each runs on both majors.

use std::sync::Mutex;
use std::time::Duration;

use queue_core::trace::{self, TraceContext};
use queue_core::{Backoff, Job, JobError, JobOptions, JobState, Processor};
use queue_tests::node::Bullmq;
use queue_tests::{wait_for_state, TestRedis, SOON};

/// OpenTelemetry's span kinds, as the Node SDK numbers them.
const PRODUCER: u64 = 3;
const CONSUMER: u64 = 4;

/// The spans a traced Node command printed.
fn spans(lines: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    lines.iter().filter_map(|l| l.get("span")).collect()
}

fn one_span<'a>(spans: &[&'a serde_json::Value], kind: u64) -> &'a serde_json::Value {
    let of_kind: Vec<_> = spans.iter().filter(|s| s["kind"] == kind).collect();
    assert_eq!(of_kind.len(), 1, "one span of kind {kind}: {spans:?}");
    of_kind[0]
}

/// The jobs our worker ran, with the trace context each carried.
static SEEN: Mutex<Vec<(String, Option<TraceContext>)>> = Mutex::new(Vec::new());

async fn record(job: Job<serde_json::Value>) -> Result<(), JobError> {
    SEEN.lock()
        .unwrap()
        .push((job.id().to_owned(), job.trace_context().cloned()));
    Ok(())
}

#[tokio::test]
async fn a_node_producers_trace_continues_in_our_worker() {
    node_trace_continues_here(Bullmq::V5).await;
}

#[tokio::test]
async fn a_node6_producers_trace_continues_in_our_worker() {
    node_trace_continues_here(Bullmq::V6).await;
}

async fn node_trace_continues_here(bullmq: Bullmq) {
    let redis = TestRedis::new(&format!("tm-in-{}", bullmq.major()));
    let id = format!("node-traced-{}", bullmq.major());
    let jobs = serde_json::json!([{"name": "traced", "data": {"n": 1}, "opts": {"jobId": id}}]);
    let lines = bullmq
        .run(
            redis.prefix(),
            &["produce-traced", "tm-in", &jobs.to_string()],
        )
        .await;
    let spans = spans(&lines);
    let request = spans
        .iter()
        .find(|s| s["name"] == "request")
        .expect("the request span");
    let add = one_span(&spans, PRODUCER);
    assert_eq!(add["traceId"], request["traceId"]);
    assert_eq!(add["parentSpanId"], request["spanId"], "{spans:?}");

    let app = redis
        .app(|b| b.processor(Processor::new("tm-in").any_job(record)))
        .await;
    let q = app.queue::<serde_json::Value>("tm-in").unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&q, &id, JobState::Completed, SOON).await;
    workers.shutdown(SOON).await;

    let seen = SEEN.lock().unwrap().clone();
    let (_, context) = seen
        .iter()
        .find(|(seen, _)| *seen == id)
        .expect("our worker ran the job");
    let context = context.as_ref().expect("the job carried Node's trace");
    // Our attempt continues Node's trace, below Node's producer span.
    assert_eq!(context.trace_id(), add["traceId"].as_str().unwrap());
    assert_eq!(context.span_id(), add["spanId"].as_str().unwrap());
}

#[tokio::test]
async fn our_trace_continues_in_a_node_worker_and_a_node_retry_keeps_the_timeout() {
    our_trace_continues_in_node(Bullmq::V5).await;
}

#[tokio::test]
async fn our_trace_continues_in_a_node6_worker_and_a_node6_retry_keeps_the_timeout() {
    our_trace_continues_in_node(Bullmq::V6).await;
}

async fn our_trace_continues_in_node(bullmq: Bullmq) {
    let redis = TestRedis::new(&format!("tm-out-{}", bullmq.major()));
    let app = redis.app(|b| b).await;
    let q = app.queue::<serde_json::Value>("tm-out").unwrap();
    let request = TraceContext::new_root();
    trace::scope(request.clone(), async {
        q.add(
            "welcome",
            serde_json::json!({"failFirst": true}),
            JobOptions::new()
                .job_id("rust-traced-1")
                .attempts(2)
                .backoff(Backoff::fixed(Duration::from_millis(50)))
                .timeout(Duration::from_millis(2500)),
        )
        .await
    })
    .await
    .unwrap();
    // What our add wrote is what bullmq-otel reads: `tm`, holding our producer span.
    let stored = |field: &str| -> serde_json::Value {
        let opts: serde_json::Value =
            serde_json::from_str(&redis.job_field("tm-out", "rust-traced-1", "opts").unwrap())
                .unwrap();
        opts[field].clone()
    };
    let written = TraceContext::from_traceparent(
        serde_json::from_str::<serde_json::Value>(stored("tm").as_str().unwrap()).unwrap()
            ["traceparent"]
            .as_str()
            .unwrap(),
        None,
    )
    .unwrap();
    assert_eq!(written.trace_id(), request.trace_id());

    let lines = bullmq
        .run(redis.prefix(), &["work-traced", "tm-out", "1"])
        .await;
    let attempts: Vec<_> = lines
        .iter()
        .filter(|l| l["id"] == "rust-traced-1")
        .collect();
    assert_eq!(attempts.len(), 2, "failed once, retried by Node: {lines:?}");
    for attempt in &attempts {
        // Node's handler runs inside our trace, and reads our timeout as an option.
        assert_eq!(attempt["traceId"], request.trace_id());
        assert_eq!(attempt["opts"]["timeout"], 2500);
    }
    let spans = spans(&lines);
    let consumers: Vec<_> = spans.iter().filter(|s| s["kind"] == CONSUMER).collect();
    assert_eq!(consumers.len(), 2, "{spans:?}");
    for span in consumers {
        assert_eq!(span["traceId"], request.trace_id());
        assert_eq!(span["parentSpanId"], written.span_id());
    }

    // After Node's retry and completion the job still holds both, and reads back so.
    assert_eq!(
        q.get_job_state("rust-traced-1").await.unwrap(),
        Some(JobState::Completed)
    );
    assert_eq!(stored("timeout"), 2500);
    assert!(stored("tm").is_string());
}

#[tokio::test]
async fn a_timeout_node_wrote_is_honoured_by_our_worker() {
    node_timeout_honoured(Bullmq::V5).await;
}

#[tokio::test]
async fn a_timeout_node6_wrote_is_honoured_by_our_worker() {
    node_timeout_honoured(Bullmq::V6).await;
}

async fn node_timeout_honoured(bullmq: Bullmq) {
    let redis = TestRedis::new(&format!("tm-timeout-{}", bullmq.major()));
    let jobs = serde_json::json!([
        {"name": "bounded", "data": {}, "opts": {"jobId": "node-bounded-1", "timeout": 40}}
    ]);
    bullmq
        .run(
            redis.prefix(),
            &["produce", "tm-timeout", &jobs.to_string()],
        )
        .await;
    let app = redis
        .app(|b| {
            b.processor(Processor::new("tm-timeout").any_job(
                |_job: Job<serde_json::Value>| async {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    Ok::<_, JobError>(())
                },
            ))
        })
        .await;
    let q = app.queue::<serde_json::Value>("tm-timeout").unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&q, "node-bounded-1", JobState::Failed, SOON).await;
    workers.shutdown(SOON).await;
    let failed = q.get_job("node-bounded-1").await.unwrap().unwrap();
    let reason = failed.failed_reason.unwrap_or_default();
    assert!(reason.contains("timed out after 40ms"), "{reason}");
}
