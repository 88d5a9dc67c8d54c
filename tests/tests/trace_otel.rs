//! OpenTelemetry traces through the one `tracing-opentelemetry` layer an application
//! adds, recorded by the real SDK's in-memory exporter: an HTTP request, the job it
//! adds, the job's attempts and the follow-up job the handler adds are one trace, each
//! span below the one that caused it; and the same holds across Node's `bullmq-otel`
//! (1.x on BullMQ 5, 2.x on BullMQ 6), both directions.
//!
//! The subscriber is the process's global one, installed once: a thread's own
//! (`set_default`) can miss spans when other test threads register the same call sites
//! at the same time. The tests share its exporter and tell their spans apart by their
//! queues' names, which no other test uses.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use axum::routing::post;
use axum::{Json, Router};
use opentelemetry::trace::{SpanKind, Status, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use queue_axum::{Accepted, QueueError, QueueLayer};
use queue_core::{Backoff, Job, JobError, JobOptions, JobState, Processor, Queue};
use queue_tests::http::{listener, post_json};
use queue_tests::node::Bullmq;
use queue_tests::{wait_for_state, wait_until, TestRedis, SOON};
use tracing_subscriber::layer::SubscriberExt;

/// The request's remote parent: what a client or a gateway sent as `traceparent`.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// An OpenTelemetry SDK as an application sets one up, with the in-memory exporter, and
/// the tracing layer over it, as the global subscriber.
struct Otel {
    exporter: InMemorySpanExporter,
}

impl Otel {
    fn install() -> &'static Self {
        static OTEL: OnceLock<(Otel, SdkTracerProvider)> = OnceLock::new();
        let (otel, _provider) = OTEL.get_or_init(|| {
            let exporter = InMemorySpanExporter::default();
            let provider = SdkTracerProvider::builder()
                .with_simple_exporter(exporter.clone())
                .build();
            let subscriber = tracing_subscriber::registry()
                .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("queue-tests")));
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other global subscriber in this binary");
            (Otel { exporter }, provider)
        });
        otel
    }

    fn spans(&self) -> Vec<Span> {
        let finished = self.exporter.get_finished_spans().expect("the exporter");
        finished.iter().map(Span::of).collect()
    }

    /// Waits until spans named `name` have ended `count` times, and returns them.
    async fn wait_for(&self, name: &str, count: usize) -> Vec<Span> {
        wait_until(SOON, &format!("{count} span(s) `{name}`"), || async {
            let named: Vec<Span> = self
                .spans()
                .into_iter()
                .filter(|s| s.name == name)
                .collect();
            (named.len() >= count).then_some(named)
        })
        .await
    }
}

/// What the assertions read of an ended span.
#[derive(Debug, Clone)]
struct Span {
    name: String,
    kind: SpanKind,
    trace: String,
    id: String,
    parent: String,
    attributes: HashMap<String, String>,
    status: Status,
}

impl Span {
    fn of(data: &SpanData) -> Self {
        Span {
            name: data.name.to_string(),
            kind: data.span_kind.clone(),
            trace: data.span_context.trace_id().to_string(),
            id: data.span_context.span_id().to_string(),
            parent: data.parent_span_id.to_string(),
            attributes: data
                .attributes
                .iter()
                .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect(),
            status: data.status.clone(),
        }
    }

    fn attribute(&self, key: &str) -> &str {
        self.attributes
            .get(key)
            .unwrap_or_else(|| panic!("{} has no `{key}`: {:?}", self.name, self.attributes))
    }

    fn the_only(spans: Vec<Span>) -> Span {
        assert_eq!(spans.len(), 1, "{spans:?}");
        spans.into_iter().next().unwrap_or_else(|| unreachable!())
    }
}

/// The follow-up queue, given to the signup handler once the app is built.
static WELCOME: OnceLock<Queue<serde_json::Value>> = OnceLock::new();

/// Adds a follow-up job from inside an attempt.
async fn signed_up(job: Job<serde_json::Value>) -> Result<(), JobError> {
    let welcome = WELCOME.get().expect("the follow-up queue");
    let id = format!("welcome-{}", job.data["user"]);
    welcome
        .add(
            "welcome",
            job.data.clone(),
            JobOptions::new()
                .job_id(id)
                .attempts(2)
                .backoff(Backoff::fixed(Duration::from_millis(20))),
        )
        .await
        .map_err(JobError::retry)?;
    Ok(())
}

/// Fails its first attempt, so that the trace shows a failed attempt and its retry.
async fn welcome(job: Job<serde_json::Value>) -> Result<(), JobError> {
    if job.attempt() == 1 {
        return Err(JobError::retry(std::io::Error::other("smtp timeout")));
    }
    Ok(())
}

async fn signup(
    axum::Extension(signups): axum::Extension<Queue<serde_json::Value>>,
    Json(body): Json<serde_json::Value>,
) -> Result<Accepted, QueueError> {
    let id = format!("signup-{}", body["user"]);
    Ok(signups
        .add("signup", body, JobOptions::new().job_id(id))
        .await?
        .into())
}

#[tokio::test]
async fn a_request_its_job_its_attempts_and_the_follow_up_are_one_trace() {
    let otel = Otel::install();
    let redis = TestRedis::new("otel-chain");
    let app = redis
        .app(|b| {
            b.processor(Processor::new("otel-signup").job("signup", signed_up))
                .processor(Processor::new("otel-welcome").job("welcome", welcome))
        })
        .await;
    let signups = app.queue::<serde_json::Value>("otel-signup").unwrap();
    let welcomes = app.queue::<serde_json::Value>("otel-welcome").unwrap();
    let _ = WELCOME.set(welcomes.clone());
    let (listener, addr) = listener().await;
    let router = Router::new()
        .route("/signup", post(signup))
        .layer(axum::Extension(signups.clone()))
        .layer(QueueLayer::new(&app));
    tokio::spawn(async move { axum::serve(listener, router).await });
    let workers = app.start_workers().await.unwrap();

    let traceparent = format!("00-{TRACE}-{CLIENT_SPAN}-01");
    let response = post_json(
        addr,
        "/signup",
        &[("traceparent", &traceparent)],
        &serde_json::json!({"user": 7}),
    )
    .await;
    assert_eq!(response.status, 202);
    wait_for_state(&welcomes, "welcome-7", JobState::Completed, SOON).await;

    let request = Span::the_only(otel.wait_for("request", 1).await);
    let add = Span::the_only(otel.wait_for("add otel-signup.signup", 1).await);
    let attempt = Span::the_only(otel.wait_for("process otel-signup", 1).await);
    let follow_up = Span::the_only(otel.wait_for("add otel-welcome.welcome", 1).await);
    let mut retried = otel.wait_for("process otel-welcome", 2).await;
    workers.shutdown(SOON).await;

    // One trace, the client's, each span below the one that caused it.
    for span in [&request, &add, &attempt, &follow_up]
        .into_iter()
        .chain(&retried)
    {
        assert_eq!(span.trace, TRACE, "{span:?}");
    }
    assert_eq!(request.parent, CLIENT_SPAN);
    assert_eq!(add.parent, request.id);
    assert_eq!(attempt.parent, add.id);
    assert_eq!(follow_up.parent, attempt.id);
    for run in &retried {
        assert_eq!(
            run.parent, follow_up.id,
            "every attempt hangs below its add"
        );
    }

    // The kinds and attributes of OpenTelemetry's messaging conventions, and BullMQ's.
    assert_eq!(
        (add.kind.clone(), attempt.kind.clone()),
        (SpanKind::Producer, SpanKind::Consumer)
    );
    assert_eq!(add.attribute("messaging.destination.name"), "otel-signup");
    assert_eq!(add.attribute("messaging.operation.type"), "send");
    assert_eq!(add.attribute("messaging.message.id"), "signup-7");
    assert_eq!(add.attribute("bullmq.job.name"), "signup");
    assert_eq!(attempt.attribute("messaging.operation.type"), "process");
    assert_eq!(attempt.attribute("messaging.system"), "bullmq");
    assert_eq!(attempt.attribute("bullmq.job.id"), "signup-7");

    // The failed attempt says so; its retry does not.
    retried.sort_by_key(|s| s.attribute("bullmq.job.attempts.made").to_owned());
    assert_eq!(retried[0].attribute("bullmq.job.attempts.made"), "0");
    match &retried[0].status {
        Status::Error { description } => {
            assert!(description.contains("smtp timeout"), "{description}")
        }
        other => panic!("the failed attempt's status is {other:?}"),
    }
    assert!(
        !matches!(retried[1].status, Status::Error { .. }),
        "{:?}",
        retried[1]
    );

    // What the job carries in BullMQ's telemetry field is the add's span.
    let stored = redis.job_field("otel-signup", "signup-7", "opts").unwrap();
    let opts: serde_json::Value = serde_json::from_str(&stored).unwrap();
    let carried: serde_json::Value = serde_json::from_str(opts["tm"].as_str().unwrap()).unwrap();
    assert_eq!(carried["traceparent"], format!("00-{TRACE}-{}-01", add.id));
}

#[tokio::test]
async fn a_node_producers_span_parents_our_attempts_span() {
    node_span_parents_ours(Bullmq::V5).await;
}

#[tokio::test]
async fn a_node6_producers_span_parents_our_attempts_span() {
    node_span_parents_ours(Bullmq::V6).await;
}

async fn node_span_parents_ours(bullmq: Bullmq) {
    let otel = Otel::install();
    let queue = format!("otel-in-{}", bullmq.major());
    let redis = TestRedis::new(&queue);
    let jobs =
        serde_json::json!([{"name": "traced", "data": {}, "opts": {"jobId": "node-otel-1"}}]);
    let lines = bullmq
        .run(
            redis.prefix(),
            &["produce-traced", &queue, &jobs.to_string()],
        )
        .await;
    let node_add = lines
        .iter()
        .filter_map(|l| l.get("span"))
        .find(|s| s["name"] == format!("add {queue}.traced").as_str())
        .unwrap_or_else(|| panic!("Node's producer span: {lines:?}"))
        .clone();

    let app = redis
        .app(|b| {
            b.processor(
                Processor::new(&queue).any_job(|_: Job<serde_json::Value>| async { Ok(()) }),
            )
        })
        .await;
    let q = app.queue::<serde_json::Value>(&queue).unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&q, "node-otel-1", JobState::Completed, SOON).await;
    let attempt = Span::the_only(otel.wait_for(&format!("process {queue}"), 1).await);
    workers.shutdown(SOON).await;

    assert_eq!(attempt.trace, node_add["traceId"].as_str().unwrap());
    assert_eq!(attempt.parent, node_add["spanId"].as_str().unwrap());
    assert_eq!(attempt.kind, SpanKind::Consumer);
}

#[tokio::test]
async fn our_producers_span_parents_a_node_workers_span() {
    our_span_parents_node(Bullmq::V5).await;
}

#[tokio::test]
async fn our_producers_span_parents_a_node6_workers_span() {
    our_span_parents_node(Bullmq::V6).await;
}

async fn our_span_parents_node(bullmq: Bullmq) {
    let otel = Otel::install();
    let queue = format!("otel-out-{}", bullmq.major());
    let redis = TestRedis::new(&queue);
    let app = redis.app(|b| b).await;
    let q = app.queue::<serde_json::Value>(&queue).unwrap();
    // A span of the application's own, as a handler or a CLI command has.
    let root = tracing::info_span!("monthly-run", queue = %queue);
    tracing::Instrument::instrument(
        q.add(
            "report",
            serde_json::json!({}),
            JobOptions::new().job_id("rust-otel-1"),
        ),
        root,
    )
    .await
    .unwrap();
    let add = Span::the_only(otel.wait_for(&format!("add {queue}.report"), 1).await);
    assert!(
        otel.spans()
            .iter()
            .any(|s| s.name == "monthly-run" && s.id == add.parent),
        "our add span is below the application's"
    );

    let lines = bullmq
        .run(redis.prefix(), &["work-traced", &queue, "1"])
        .await;
    let node_process = lines
        .iter()
        .filter_map(|l| l.get("span"))
        .find(|s| s["kind"] == 4)
        .unwrap_or_else(|| panic!("Node's consumer span: {lines:?}"));
    assert_eq!(node_process["traceId"], add.trace.as_str());
    assert_eq!(node_process["parentSpanId"], add.id.as_str());
}
