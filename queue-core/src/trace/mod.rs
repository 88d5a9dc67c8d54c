//! Tying a job to the request that enqueued it: a W3C trace context carried from the
//! producer's task to the job's span in whichever worker runs it, Rust or Node.
//!
//! The context travels in the job's own options, where BullMQ's telemetry puts it:
//! `tm` holds the JSON `{"traceparent": "...", "tracestate": "..."}` that Node's
//! `bullmq-otel` writes and reads. So a trace started by a Node producer continues in
//! our worker, and ours in a Node worker.
//!
//! ```no_run
//! # async fn demo(email: queue_core::Queue<String>) -> queue_core::Result<()> {
//! use queue_core::{trace, trace::TraceContext, JobOptions};
//!
//! // queue-axum's layer does this for every request (from `traceparent`, or a new
//! // trace):
//! let request = TraceContext::from_traceparent(
//!     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
//!     None,
//! )
//! .expect("a valid traceparent");
//! trace::scope(request, async {
//!     email.add("welcome", "ada@example.com".into(), JobOptions::new()).await
//! })
//! .await?;
//! // The worker's `job` span then has `trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"`,
//! // and `Job::trace_id()` returns it.
//! # Ok(()) }
//! ```
//!
//! # OpenTelemetry
//!
//! With the `opentelemetry` feature, the spans become OpenTelemetry spans through one
//! `tracing-opentelemetry` layer in the application's subscriber; nothing else to call.
//! Each `add` is a producer span, `add <queue>.<job>` (`addBulk <queue>` for a batch),
//! and the job carries that span's context; each attempt is a consumer span, `process
//! <queue>`, whose parent is the context the job carries, whoever wrote it. Both have
//! OpenTelemetry's messaging attributes and BullMQ's own `bullmq.*` ones, so a trace
//! reads the same whichever of our processes or Node's took part. A failed attempt
//! sets the span's status to error, with the reason.
//!
//! ```no_run
//! # #[cfg(feature = "opentelemetry")]
//! # fn install<T>(tracer: T)
//! # where
//! #     T: opentelemetry::trace::Tracer + Send + Sync + 'static,
//! #     T::Span: Send + Sync,
//! # {
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! // `tracer` comes from the application's OpenTelemetry SDK (an OTLP exporter, say).
//! let subscriber = tracing_subscriber::registry()
//!     .with(tracing_opentelemetry::layer().with_tracer(tracer));
//! tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
//! # }
//! ```
//!
//! Without the layer, the context still travels (request → job → follow-up job)
//! through [`scope`], and every `job` span logs its `trace_id`.

mod bridge;
mod context;
mod id;
mod metadata;
#[cfg(feature = "opentelemetry")]
mod otel;
mod scope;
mod spans;

pub use bridge::{context_of, set_parent, set_parent_if_unparented, OPENTELEMETRY};
pub use context::{TraceContext, MAX_TRACESTATE_LEN};
pub use scope::{current, scope, Scoped};
pub use spans::subscriber_installed;

pub(crate) use spans::{
    consumer_span, consumer_span_name, for_new_job, producer_span, record_job_id,
};
