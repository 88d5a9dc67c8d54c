//! The bridge to OpenTelemetry through `tracing-opentelemetry` (feature
//! `opentelemetry`): our [`TraceContext`] as a span's remote parent, and a span's
//! OpenTelemetry context as ours. Without that layer in the subscriber every call here
//! finds nothing and changes nothing.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::context::TraceContext;
use super::id::HexId;

/// The OpenTelemetry context of `span`, as ours; `None` when no OpenTelemetry layer
/// records the span (none installed, or the span is disabled).
pub(super) fn context_of(span: &tracing::Span) -> Option<TraceContext> {
    if span.is_disabled() {
        return None;
    }
    let context = span.context();
    let otel = context.span();
    let otel = otel.span_context();
    if !otel.is_valid() {
        return None;
    }
    let tracestate = otel.trace_state().header();
    Some(TraceContext {
        trace_id: HexId::of(u128::from_be_bytes(otel.trace_id().to_bytes())),
        span_id: HexId::of(u128::from(u64::from_be_bytes(otel.span_id().to_bytes()))),
        flags: otel.trace_flags().to_u8(),
        tracestate: (!tracestate.is_empty()).then_some(tracestate),
    })
}

/// An attribute's value as the caller has it, borrowed: it becomes OpenTelemetry's
/// (a string copied) only inside `set_attribute`, when an OpenTelemetry layer records the
/// span. Every add and every attempt sets these, and most apps record no such span.
pub(super) enum Attribute<'a> {
    Str(&'a str),
    Static(&'static str),
    Int(i64),
}

impl From<Attribute<'_>> for opentelemetry::Value {
    fn from(value: Attribute<'_>) -> Self {
        match value {
            Attribute::Str(s) => s.to_owned().into(),
            Attribute::Static(s) => s.into(),
            Attribute::Int(i) => i.into(),
        }
    }
}

/// Sets attributes of `span`'s OpenTelemetry span only (not `tracing` fields, so no log
/// line shows them). Nothing happens when no layer records the span.
pub(super) fn set_attributes<const N: usize>(
    span: &tracing::Span,
    attributes: [(&'static str, Attribute<'_>); N],
) {
    if span.is_disabled() {
        return;
    }
    for (key, value) in attributes {
        span.set_attribute(key, value);
    }
}

/// OpenTelemetry's messaging attributes of a queue operation, as BullMQ's telemetry
/// sets them.
pub(super) fn set_messaging_attributes(
    span: &tracing::Span,
    operation_type: &'static str,
    operation: &'static str,
    queue: &str,
    job_name: Option<&str>,
) {
    set_attributes(
        span,
        [
            ("messaging.system", Attribute::Static("bullmq")),
            (
                "messaging.operation.type",
                Attribute::Static(operation_type),
            ),
            ("messaging.operation.name", Attribute::Static(operation)),
            ("messaging.destination.name", Attribute::Str(queue)),
            ("bullmq.queue.name", Attribute::Str(queue)),
            ("bullmq.queue.operation", Attribute::Static(operation)),
        ],
    );
    if let Some(name) = job_name {
        set_attributes(span, [("bullmq.job.name", Attribute::Str(name))]);
    }
}

/// Makes `parent`, a context from another process, the OpenTelemetry parent of `span`.
/// Nothing happens when no layer records the span, or it has already been entered.
pub(super) fn set_parent(span: &tracing::Span, parent: &TraceContext) {
    if span.is_disabled() {
        return;
    }
    let ids = (
        u128::from_str_radix(parent.trace_id(), 16),
        u64::from_str_radix(parent.span_id(), 16),
    );
    // Always true: a context's ids are checked hex when it is made.
    let (Ok(trace_id), Ok(span_id)) = ids else {
        return;
    };
    let state = parent
        .tracestate()
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    let remote = SpanContext::new(
        TraceId::from_bytes(trace_id.to_be_bytes()),
        SpanId::from_bytes(span_id.to_be_bytes()),
        TraceFlags::new(parent.flags),
        true,
        state,
    );
    // Refused only when no layer records the span or it has started: then there is
    // nothing to parent.
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
}
