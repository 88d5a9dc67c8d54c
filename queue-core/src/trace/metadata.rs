//! A trace context as BullMQ keeps it in a job's `tm` option: the JSON carrier that
//! Node's `bullmq-otel` writes with OpenTelemetry's W3C propagator. Kept apart from
//! the context type because it is BullMQ's storage format, not the W3C one, and it is
//! what lets a trace cross between our processes and Node's.

use serde::{Deserialize, Serialize};

use super::context::TraceContext;

impl TraceContext {
    /// The propagation metadata BullMQ stores in a job's `tm` option: the JSON object
    /// `bullmq-otel` makes with OpenTelemetry's W3C propagator.
    pub(crate) fn to_metadata(&self) -> String {
        match self.tracestate() {
            // Hex digits and dashes need no JSON escaping.
            None => {
                let mut out = String::with_capacity(74);
                out.push_str(r#"{"traceparent":""#);
                self.write_traceparent(&mut out);
                out.push_str(r#""}"#);
                out
            }
            Some(tracestate) => {
                let carrier = Carrier {
                    traceparent: Some(self.traceparent()),
                    tracestate: Some(tracestate.to_owned()),
                };
                // Two strings: serializing cannot fail.
                serde_json::to_string(&carrier).unwrap_or_default()
            }
        }
    }

    /// Reads the `tm` option of a job, as any BullMQ producer wrote it; `None` when it
    /// holds no valid W3C context.
    pub(crate) fn from_metadata(metadata: &str) -> Option<Self> {
        let carrier: Carrier = serde_json::from_str(metadata).ok()?;
        Self::from_traceparent(
            carrier.traceparent.as_deref()?,
            carrier.tracestate.as_deref(),
        )
    }
}

/// The carrier OpenTelemetry's propagator fills: header names to values.
#[derive(Serialize, Deserialize)]
struct Carrier {
    #[serde(skip_serializing_if = "Option::is_none")]
    traceparent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tracestate: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const SPAN: &str = "00f067aa0ba902b7";

    #[test]
    fn metadata_is_what_bullmq_otel_writes() {
        let ctx =
            TraceContext::from_traceparent(&format!("00-{TRACE}-{SPAN}-01"), Some("k=v")).unwrap();
        let metadata = ctx.to_metadata();
        assert_eq!(
            metadata,
            format!(r#"{{"traceparent":"00-{TRACE}-{SPAN}-01","tracestate":"k=v"}}"#)
        );
        assert_eq!(TraceContext::from_metadata(&metadata), Some(ctx));
        // What bullmq-otel stores when the producer had no active span.
        assert_eq!(TraceContext::from_metadata("{}"), None);
        assert_eq!(TraceContext::from_metadata("not json"), None);
    }
}
