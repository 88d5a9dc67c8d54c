//! The spans a job's life opens, named and attributed as BullMQ's telemetry does it:
//! a producer span per add, a consumer span per attempt, and the context each hands on
//! to the jobs added under it. So that a trace reads the same whichever of our
//! processes or Node's took part.

use std::fmt;

use super::bridge::{context_of, set_parent, set_parent_if_unparented};
use super::context::TraceContext;
#[cfg(feature = "opentelemetry")]
use super::otel::Attribute;
use super::scope::{current_child, with_current};

/// Whether a `tracing` subscriber is installed (the current default, scoped or
/// global). Without one no span is ever recorded, so ours (and queue-axum's request
/// span) are not made at all: making one still costs each add and each attempt its
/// fields, and with `tracing`'s `log` feature (which `sqlx` turns on) a round of
/// questions to `log`. The trace context travels without them.
///
/// ```
/// assert!(!queue_core::trace::subscriber_installed());
/// let subscriber = tracing_subscriber::registry();
/// tracing::subscriber::with_default(subscriber, || {
///     assert!(queue_core::trace::subscriber_installed());
/// });
/// ```
pub fn subscriber_installed() -> bool {
    !tracing::dispatcher::get_default(|dispatch| dispatch.is::<tracing::subscriber::NoSubscriber>())
}

/// The context a job added now carries: the current span's, when OpenTelemetry records
/// it (inside `add`, that is the add's producer span), else a child of the current
/// [`scope`](super::scope)'s.
pub(crate) fn for_new_job() -> Option<TraceContext> {
    context_of(&tracing::Span::current()).or_else(current_child)
}

/// The producer span of one add, as BullMQ's telemetry names it (`add <queue>.<job>`,
/// `addBulk <queue>` for a batch), with OpenTelemetry's messaging attributes. A job
/// given its own context hangs below that context; otherwise below the current span,
/// or the current scope.
pub(crate) fn producer_span(
    operation: &'static str,
    queue: &str,
    job_name: Option<&str>,
    explicit: Option<&TraceContext>,
) -> tracing::Span {
    if !subscriber_installed() {
        return tracing::Span::none();
    }
    // A log line's fields: the queue, the job's name, and its id once known.
    #[cfg(not(feature = "opentelemetry"))]
    let span = {
        let _ = operation;
        tracing::info_span!(
            target: "queue_core::queue",
            "add",
            queue,
            job_name,
            job_id = tracing::field::Empty,
        )
    };
    // The same, and what `tracing-opentelemetry` reads from fields (the span's name and
    // kind). BullMQ's messaging attributes go to the OpenTelemetry span only: a log
    // line does not repeat the queue and the name four times.
    #[cfg(feature = "opentelemetry")]
    let span = {
        let span = tracing::info_span!(
            target: "queue_core::queue",
            "add",
            queue,
            job_name,
            job_id = tracing::field::Empty,
            otel.name = %ProducerSpanName { operation, queue, job_name },
            otel.kind = "producer",
        );
        super::otel::set_messaging_attributes(&span, "send", operation, queue, job_name);
        span
    };
    // A span nobody records has no parent to take.
    if span.is_disabled() {
        return span;
    }
    match explicit {
        Some(parent) => set_parent(&span, parent),
        // Borrowed, not cloned: every add passes here, and without OpenTelemetry
        // nothing reads it.
        None => {
            let _ = with_current(|scope| set_parent_if_unparented(&span, Some(scope)));
        }
    }
    span
}

/// The OpenTelemetry name of a queue's attempt spans, as BullMQ's telemetry names them.
pub(crate) fn consumer_span_name(queue: &str) -> String {
    format!("process {queue}")
}

/// The consumer span of one attempt, named `span_name` ([`consumer_span_name`], made
/// once per queue rather than formatted per job), with OpenTelemetry's messaging
/// attributes; its parent is the context the job carries. The status fields are
/// recorded when the attempt fails.
///
/// Also returns the context the attempt runs in, so that jobs its handler adds continue
/// the trace: the span's own when OpenTelemetry records it, else the carried one.
pub(crate) fn consumer_span(
    span_name: &str,
    queue: &str,
    job_id: &str,
    job_name: &str,
    attempt: u32,
    carried: Option<&TraceContext>,
) -> (tracing::Span, Option<TraceContext>) {
    if !subscriber_installed() {
        return (tracing::Span::none(), carried.cloned());
    }
    // What a log line of the attempt needs; the attempt is 1-based, as a person counts.
    #[cfg(not(feature = "opentelemetry"))]
    let span = {
        let _ = span_name;
        tracing::info_span!(
            target: "queue_core::worker",
            "job",
            queue,
            job_id,
            job_name,
            attempt,
            trace_id = tracing::field::Empty,
        )
    };
    // The same, with the fields `tracing-opentelemetry` reads (name, kind, status).
    // BullMQ's messaging attributes, `bullmq.job.attempts.made` (0 on the first attempt)
    // among them, go to the OpenTelemetry span only: a log line never says both
    // `attempt=1` and `attempts.made=0`.
    #[cfg(feature = "opentelemetry")]
    let span = {
        let span = tracing::info_span!(
            target: "queue_core::worker",
            "job",
            queue,
            job_id,
            job_name,
            // As i64: the bridge keeps integers as integers only when they are signed.
            attempt = i64::from(attempt),
            trace_id = tracing::field::Empty,
            otel.name = span_name,
            otel.kind = "consumer",
            otel.status_code = tracing::field::Empty,
            otel.status_description = tracing::field::Empty,
        );
        super::otel::set_messaging_attributes(&span, "process", "process", queue, Some(job_name));
        super::otel::set_attributes(
            &span,
            [
                ("messaging.message.id", Attribute::Str(job_id)),
                ("bullmq.job.id", Attribute::Str(job_id)),
                (
                    "bullmq.job.attempts.made",
                    Attribute::Int(i64::from(attempt.saturating_sub(1))),
                ),
            ],
        );
        span
    };
    if let Some(parent) = carried {
        set_parent(&span, parent);
    }
    let own = context_of(&span);
    // For log lines: the trace the attempt is part of, its own or the carried one.
    if let Some(trace) = own.as_ref().or(carried) {
        span.record("trace_id", trace.trace_id());
    }
    let context = own.or_else(|| carried.cloned());
    (span, context)
}

/// Records the id an add gave its job on the add's span (`job_id`, and with the
/// `opentelemetry` feature BullMQ's messaging attributes).
pub(crate) fn record_job_id(span: &tracing::Span, id: &str) {
    span.record("job_id", id);
    #[cfg(feature = "opentelemetry")]
    super::otel::set_attributes(
        span,
        [
            ("messaging.message.id", Attribute::Str(id)),
            ("bullmq.job.id", Attribute::Str(id)),
        ],
    );
}

/// `add <queue>.<job>` or `<operation> <queue>`, written only if a layer records it.
#[cfg_attr(not(feature = "opentelemetry"), allow(dead_code))]
struct ProducerSpanName<'a> {
    operation: &'static str,
    queue: &'a str,
    job_name: Option<&'a str>,
}

impl fmt::Display for ProducerSpanName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.job_name {
            Some(job) => write!(f, "{} {}.{job}", self.operation, self.queue),
            None => write!(f, "{} {}", self.operation, self.queue),
        }
    }
}
