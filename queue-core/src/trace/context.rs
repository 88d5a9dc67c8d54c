//! `TraceContext`, the W3C trace context a job carries: made from a `traceparent`
//! header or started fresh, checked on the way in, and written back as a
//! `traceparent`. What BullMQ stores of it is in `metadata`; where it comes from at
//! run time, in `scope` and `bridge`.

use std::fmt;

use super::id::{lower_hex, new_span_id, random_id, HexId};

/// The longest `tracestate` carried (the W3C limit is 32 members of up to 256 bytes;
/// real ones are far shorter, and this keeps a job's options small).
pub const MAX_TRACESTATE_LEN: usize = 512;

/// A W3C trace context: the trace a job belongs to and the span it continues.
///
/// Made from a `traceparent` header ([`TraceContext::from_traceparent`]) or started
/// fresh ([`TraceContext::new_root`]). Every field is checked on the way in, so a
/// context is always safe to log, store and send on.
///
/// ```
/// use queue_core::trace::TraceContext;
///
/// let ctx = TraceContext::from_traceparent(
///     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
///     Some("vendor=abc"),
/// )
/// .unwrap();
/// assert_eq!(ctx.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
/// assert!(ctx.sampled());
/// let child = ctx.child();
/// assert_eq!(child.trace_id(), ctx.trace_id());
/// assert_ne!(child.span_id(), ctx.span_id());
/// assert!(TraceContext::from_traceparent("00-0000-00-01", None).is_none());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TraceContext {
    // Open to `trace`'s own modules: `otel` builds and reads contexts field by field.
    // Whoever does so keeps the invariant that each field was checked.
    pub(super) trace_id: HexId<32>,
    pub(super) span_id: HexId<16>,
    pub(super) flags: u8,
    pub(super) tracestate: Option<String>,
}

impl fmt::Debug for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.traceparent())
    }
}

impl fmt::Display for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.traceparent())
    }
}

impl TraceContext {
    /// A new trace, sampled, with no parent.
    pub fn new_root() -> Self {
        TraceContext {
            trace_id: HexId::of(random_id(128)),
            span_id: new_span_id(),
            flags: 1,
            tracestate: None,
        }
    }

    /// Parses a `traceparent` value by the W3C Trace Context rules (lower-case hex
    /// fields `version-traceid-parentid-flags`; version `ff` is invalid; version `00`
    /// has exactly these four fields, later versions may append more; neither id may be
    /// all zeros), with its `tracestate` if any. `None` when it breaks a rule; a
    /// `tracestate` that is not printable ASCII or is longer than
    /// [`MAX_TRACESTATE_LEN`] is dropped, as the standard allows.
    pub fn from_traceparent(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        let mut fields = traceparent.trim().splitn(5, '-');
        let (version, trace, span, flags) = (
            fields.next()?,
            fields.next()?,
            fields.next()?,
            fields.next()?,
        );
        let rest = fields.next();
        if !lower_hex(flags, 2) {
            return None;
        }
        let flags = u8::from_str_radix(flags, 16).ok()?;
        let valid = lower_hex(version, 2) && version != "ff" && (rest.is_none() || version != "00");
        if !valid {
            return None;
        }
        Some(TraceContext {
            trace_id: HexId::parse_nonzero(trace)?,
            span_id: HexId::parse_nonzero(span)?,
            flags,
            tracestate: tracestate
                .map(str::trim)
                .filter(|s| {
                    !s.is_empty()
                        && s.len() <= MAX_TRACESTATE_LEN
                        && s.bytes().all(|b| (b' '..=b'~').contains(&b))
                })
                .map(str::to_owned),
        })
    }

    /// The same trace, continued by a new span (what a producer writes into the job
    /// it adds: the job's attempt then hangs below the add, not beside it).
    pub fn child(&self) -> Self {
        TraceContext {
            span_id: new_span_id(),
            ..self.clone()
        }
    }

    /// The trace id: 32 lower-case hex digits.
    pub fn trace_id(&self) -> &str {
        self.trace_id.as_str()
    }

    /// The span this context continues: 16 lower-case hex digits.
    pub fn span_id(&self) -> &str {
        self.span_id.as_str()
    }

    /// Whether the trace is sampled (flag `01`).
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The vendor-specific `tracestate`, if any.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The `traceparent` value (version `00`).
    pub fn traceparent(&self) -> String {
        let mut out = String::with_capacity(55);
        self.write_traceparent(&mut out);
        out
    }

    /// Appends the `traceparent` value to `out` (no formatting machinery: this runs for
    /// every job a traced request adds).
    pub(super) fn write_traceparent(&self, out: &mut String) {
        out.push_str("00-");
        out.push_str(self.trace_id.as_str());
        out.push('-');
        out.push_str(self.span_id.as_str());
        out.push('-');
        out.push_str(HexId::<2>::of(u128::from(self.flags)).as_str());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const SPAN: &str = "00f067aa0ba902b7";

    #[test]
    fn traceparent_follows_the_w3c_rules() {
        let valid = format!("00-{TRACE}-{SPAN}-01");
        let ctx = TraceContext::from_traceparent(&valid, None).unwrap();
        assert_eq!((ctx.trace_id(), ctx.span_id()), (TRACE, SPAN));
        assert_eq!(ctx.traceparent(), valid);
        assert!(
            TraceContext::from_traceparent(&format!("01-{TRACE}-{SPAN}-01-xyz"), None).is_some(),
            "later versions may append fields"
        );
        for bad in [
            format!("00-{TRACE}-{SPAN}-01-xyz"),
            format!("ff-{TRACE}-{SPAN}-01"),
            format!("00-{}-{SPAN}-01", TRACE.to_uppercase()),
            format!("00-{}-{SPAN}-01", "0".repeat(32)),
            format!("00-{TRACE}-{}-01", "0".repeat(16)),
            format!("00-{TRACE}-{SPAN}-0"),
            format!("00-{TRACE}-{SPAN}"),
            format!("00-{TRACE}-{SPAN}-zz"),
            format!("00-{TRACE}-{SPAN}-+1"),
            format!("+0-{TRACE}-{SPAN}-01"),
            "x".repeat(10_000),
            String::new(),
        ] {
            assert_eq!(
                TraceContext::from_traceparent(&bad, None),
                None,
                "{bad:.80}"
            );
        }
    }

    #[test]
    fn tracestate_is_kept_only_when_safe() {
        let tp = format!("00-{TRACE}-{SPAN}-00");
        let with = |state: &str| TraceContext::from_traceparent(&tp, Some(state)).unwrap();
        assert_eq!(with("a=1,b=2").tracestate(), Some("a=1,b=2"));
        assert!(!with("a=1").sampled());
        assert_eq!(with("a=\n1").tracestate(), None);
        assert_eq!(with(&"a".repeat(MAX_TRACESTATE_LEN + 1)).tracestate(), None);
    }

    #[test]
    fn new_traces_and_children_are_valid_and_distinct() {
        let root = TraceContext::new_root();
        let parsed = TraceContext::from_traceparent(&root.traceparent(), None).unwrap();
        assert_eq!(parsed, root);
        let child = root.child();
        assert_eq!(child.trace_id(), root.trace_id());
        assert_ne!(child.span_id(), root.span_id());
        assert_ne!(TraceContext::new_root().trace_id(), root.trace_id());
        let spans: std::collections::HashSet<String> = (0..10_000)
            .map(|_| root.child().span_id().to_owned())
            .collect();
        assert_eq!(spans.len(), 10_000, "span ids do not repeat");
        assert_eq!(
            TraceContext::from_metadata(&root.to_metadata()),
            Some(root.clone()),
            "the fast path writes what bullmq-otel writes"
        );
    }
}
