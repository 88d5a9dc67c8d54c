//! Our trace contexts in and out of OpenTelemetry, one API whether or not the
//! `opentelemetry` feature is on: without it (or without a `tracing-opentelemetry`
//! layer) every call finds nothing and changes nothing, so callers need no `cfg`. The
//! feature's side is `otel`.

use super::context::TraceContext;

/// Whether this build bridges to OpenTelemetry (the `opentelemetry` feature).
pub const OPENTELEMETRY: bool = cfg!(feature = "opentelemetry");

/// The trace context `span` has in OpenTelemetry, as ours: `Some` only with the
/// `opentelemetry` feature and a `tracing-opentelemetry` layer that records the span.
///
/// ```
/// let span = tracing::info_span!("no layer records this");
/// assert_eq!(queue_core::trace::context_of(&span), None);
/// ```
pub fn context_of(span: &tracing::Span) -> Option<TraceContext> {
    #[cfg(feature = "opentelemetry")]
    return super::otel::context_of(span);
    #[cfg(not(feature = "opentelemetry"))]
    {
        let _ = span;
        None
    }
}

/// Makes `parent` (a context from another process: a request's `traceparent`, a
/// job's stored context) the OpenTelemetry parent of `span`, which must not have been
/// entered yet. Does nothing without the `opentelemetry` feature and its layer.
pub fn set_parent(span: &tracing::Span, parent: &TraceContext) {
    #[cfg(feature = "opentelemetry")]
    super::otel::set_parent(span, parent);
    #[cfg(not(feature = "opentelemetry"))]
    let _ = (span, parent);
}

/// Parents a new `span` by `parent` when the code around it traces only through our
/// scope (its own current span has no OpenTelemetry context); a span inside an
/// OpenTelemetry-traced span keeps that parent.
pub fn set_parent_if_unparented(span: &tracing::Span, parent: Option<&TraceContext>) {
    if let Some(parent) = parent {
        if context_of(&tracing::Span::current()).is_none() {
            set_parent(span, parent);
        }
    }
}
