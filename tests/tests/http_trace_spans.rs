//! The spans a traced request makes when a `tracing` subscriber is installed (a log
//! subscriber, no OpenTelemetry): the layer's `request` span with the trace id, the
//! add's `add` span with the job id, and the job carrying the same trace. Without a
//! subscriber, no span is made at all and the job still carries the trace
//! (`http/layer.rs`, which installs none). A request cut off drops its handler inside its
//! `request` span, so what the handler logs as it is dropped is the request's.
//!
//! A binary of its own: its tests install a thread's subscriber (`set_default`) and count
//! spans exactly, which other tests making the same spans at the same time without one
//! could race (a call site's interest is cached for the whole process).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::routing::post;
use axum::{Json, Router};
use queue_axum::{Accepted, QueueError, QueueLayer};
use queue_core::prelude::*;
use queue_core::{app::Registrations, inject_queue};
use queue_tests::http::{listener, post_json};
use queue_tests::TestRedis;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// A span's name and its fields as text, as a log line would show them.
type Recorded = (String, BTreeMap<String, String>);

/// Records every span's name and fields, by span id.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<BTreeMap<u64, Recorded>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let name = attrs.metadata().name().to_owned();
        self.0.lock().unwrap().insert(id.into_u64(), (name, fields));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some((_, fields)) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }
}

/// An event's message and the name of the span it was logged in.
type Logged = (String, Option<String>);

/// Records every event, as [`Logged`].
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<Logged>>>);

struct Message<'a>(&'a mut String);

impl Visit for Message<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Events {
    fn on_event(&self, event: &tracing::Event<'_>, context: Context<'_, S>) {
        let mut message = String::new();
        event.record(&mut Message(&mut message));
        let span = context.event_span(event).map(|span| span.name().to_owned());
        self.0.lock().unwrap().push((message, span));
    }
}

impl Spans {
    /// The fields of every span named `name`.
    fn named(&self, name: &str) -> Vec<BTreeMap<String, String>> {
        let spans = self.0.lock().unwrap();
        spans
            .values()
            .filter(|(n, _)| n == name)
            .map(|(_, fields)| fields.clone())
            .collect()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Note {
    text: String,
}

#[inject_queue(axum)]
struct Notes {
    #[queue("span-notes")]
    notes: Queue<Note>,
}

async fn note(producers: Notes, Json(note): Json<Note>) -> Result<Accepted, QueueError> {
    let job = producers
        .notes
        .add("note", note, JobOptions::new().job_id("note-1"))
        .await?;
    Ok(job.into())
}

/// An app on the test's Redis that runs no workers: only its adds are looked at.
async fn app_of(redis: &TestRedis) -> queue_core::QueueApp {
    redis
        .builder()
        .registrations(Registrations::None)
        .build()
        .await
        .unwrap()
}

// One thread: the subscriber is the test's own (a scoped default), and the server's
// tasks run where it is set.
#[tokio::test(flavor = "current_thread")]
async fn with_a_subscriber_the_request_and_its_add_are_spans_of_the_jobs_trace() {
    let spans = Spans::default();
    let _subscriber =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let redis = TestRedis::new("trace-spans");
    let app = app_of(&redis).await;
    let router = Router::new()
        .route("/notes", post(note))
        .layer(QueueLayer::new(&app));
    let (listener, addr) = listener().await;
    let server = tokio::spawn(async move { axum::serve(listener, router).await });

    let answer = post_json(addr, "/notes", &[], &serde_json::json!({"text": "hi"})).await;
    assert_eq!(answer.status, 202);
    let trace_id = answer
        .header("x-request-id")
        .expect("the new trace's id is echoed")
        .to_owned();
    assert_eq!(trace_id.len(), 32, "{trace_id}");

    let requests = spans.named("request");
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].get("trace_id"), Some(&trace_id), "{requests:?}");
    let adds = spans.named("add");
    assert_eq!(adds.len(), 1, "{adds:?}");
    assert_eq!(adds[0].get("queue").map(String::as_str), Some("span-notes"));
    assert_eq!(adds[0].get("job_id").map(String::as_str), Some("note-1"));

    // The job carries the request's trace, in BullMQ's telemetry field.
    let opts: serde_json::Value =
        serde_json::from_str(&redis.job_field("span-notes", "note-1", "opts").unwrap()).unwrap();
    let carried: serde_json::Value = serde_json::from_str(opts["tm"].as_str().unwrap()).unwrap();
    let traceparent = carried["traceparent"].as_str().unwrap();
    assert!(
        traceparent.starts_with(&format!("00-{trace_id}-")),
        "{traceparent}"
    );
    server.abort();
}

/// Logs when dropped: what a handler's clean-up logs when its request is cut off.
struct LogsOnDrop;

impl Drop for LogsOnDrop {
    fn drop(&mut self) {
        tracing::info!("handler dropped");
    }
}

async fn hangs() -> &'static str {
    let _guard = LogsOnDrop;
    std::future::pending::<()>().await;
    "never"
}

#[tokio::test(flavor = "current_thread")]
async fn a_request_cut_off_drops_its_handler_inside_the_request_span() {
    let events = Events::default();
    let _subscriber = tracing::subscriber::set_default(
        tracing_subscriber::registry()
            .with(Spans::default())
            .with(events.clone()),
    );
    let redis = TestRedis::new("trace-drop");
    let app = app_of(&redis).await;
    let mut router = Router::new()
        .route("/hangs", axum::routing::get(hangs))
        .layer(QueueLayer::new(&app));
    let request = axum::http::Request::get("/hangs")
        .body(axum::body::Body::empty())
        .unwrap();
    let response = tower::Service::call(&mut router, request);
    // Polled once (the handler starts and waits), then dropped, as hyper drops the
    // future of a request whose client has gone.
    assert!(futures::FutureExt::now_or_never(response).is_none());

    let events = events.0.lock().unwrap().clone();
    let dropped = events
        .iter()
        .find(|(message, _)| message == "handler dropped")
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(dropped.1.as_deref(), Some("request"), "{events:?}");
}
