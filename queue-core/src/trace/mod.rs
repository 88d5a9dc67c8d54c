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

use std::fmt;
use std::future::Future;

use serde::{Deserialize, Serialize};

#[cfg(feature = "opentelemetry")]
mod otel;

tokio::task_local! {
    static CURRENT: TraceContext;
}

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
    trace_id: HexId<32>,
    span_id: HexId<16>,
    flags: u8,
    tracestate: Option<String>,
}

/// An id as its `N` lower-case hex digits, inline: a context is made for every traced
/// request and every job it adds, so its ids cost no allocation and copy as bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct HexId<const N: usize>([u8; N]);

impl<const N: usize> HexId<N> {
    /// The low `N` hex digits of `value`.
    fn of(value: u128) -> Self {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut digits = [b'0'; N];
        for (i, digit) in digits.iter_mut().rev().enumerate() {
            *digit = DIGITS[((value >> (4 * i)) & 0xf) as usize];
        }
        HexId(digits)
    }

    /// `s` when it is exactly `N` lower-case hex digits, not all zeros.
    fn parse_nonzero(s: &str) -> Option<Self> {
        if !nonzero_hex(s, N) {
            return None;
        }
        let mut digits = [0; N];
        digits.copy_from_slice(s.as_bytes());
        Some(HexId(digits))
    }

    fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever stored.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
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

/// Lower-case hex of exactly `len` characters.
fn lower_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Lower-case hex of exactly `len` characters, not all zeros.
fn nonzero_hex(s: &str, len: usize) -> bool {
    lower_hex(s, len) && s.bytes().any(|b| b != b'0')
}

/// A random non-zero id of `bits` bits, from a per-thread generator seeded once from the
/// system's randomness: ids must not collide, not be secret, and a request must not pay
/// a system call for each (OpenTelemetry's SDKs make them the same way).
fn random_id(bits: u32) -> u128 {
    thread_local! {
        static STATE: std::cell::Cell<u64> =
            std::cell::Cell::new(uuid::Uuid::new_v4().as_u64_pair().0);
    }
    // SplitMix64: a full-period generator whose outputs pass statistical tests.
    let next = || {
        STATE.with(|state| {
            let mut z = state.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
            state.set(z);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        })
    };
    loop {
        let id = if bits > 64 {
            (u128::from(next()) << 64) | u128::from(next())
        } else {
            u128::from(next())
        };
        if id != 0 {
            return id;
        }
    }
}

/// A random span id: 16 hex digits, not all zeros.
fn new_span_id() -> HexId<16> {
    HexId::of(random_id(64))
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
    fn write_traceparent(&self, out: &mut String) {
        out.push_str("00-");
        out.push_str(self.trace_id.as_str());
        out.push('-');
        out.push_str(self.span_id.as_str());
        out.push('-');
        out.push_str(HexId::<2>::of(u128::from(self.flags)).as_str());
    }

    /// The propagation metadata BullMQ stores in a job's `tm` option: the JSON object
    /// `bullmq-otel` makes with OpenTelemetry's W3C propagator.
    pub(crate) fn to_metadata(&self) -> String {
        match &self.tracestate {
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
                    tracestate: Some(tracestate.clone()),
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

/// Runs `future` with `context` as the current trace context: jobs it adds carry a
/// child of it.
pub async fn scope<F: Future>(context: TraceContext, future: F) -> F::Output {
    CURRENT.scope(context, future).await
}

/// The current task's trace context, if it runs inside [`scope`]. A handler runs
/// inside its job's context, so the jobs it adds continue the trace.
pub fn current() -> Option<TraceContext> {
    CURRENT.try_with(Clone::clone).ok()
}

/// A child of the current trace context, if any.
fn current_child() -> Option<TraceContext> {
    CURRENT.try_with(TraceContext::child).ok()
}

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
    return otel::context_of(span);
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
    otel::set_parent(span, parent);
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

/// The context a job added now carries: the current span's, when OpenTelemetry records
/// it (inside `add`, that is the add's producer span), else a child of the current
/// [`scope`]'s.
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
    let span = tracing::info_span!(
        target: "queue_core::queue",
        "add",
        otel.name = %ProducerSpanName { operation, queue, job_name },
        otel.kind = "producer",
        messaging.system = "bullmq",
        messaging.operation.type = "send",
        messaging.operation.name = operation,
        messaging.destination.name = queue,
        messaging.message.id = tracing::field::Empty,
        bullmq.queue.name = queue,
        bullmq.queue.operation = operation,
        bullmq.job.name = job_name,
        bullmq.job.id = tracing::field::Empty,
    );
    match explicit {
        Some(parent) => set_parent(&span, parent),
        // Borrowed, not cloned: every add passes here, and without OpenTelemetry
        // nothing reads it.
        None => {
            let _ = CURRENT.try_with(|scope| set_parent_if_unparented(&span, Some(scope)));
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
    let span = tracing::info_span!(
        target: "queue_core::worker",
        "job",
        queue,
        job_id,
        name = job_name,
        // As i64: the bridge keeps integers as integers only when they are signed.
        attempt = i64::from(attempt),
        // For logs; an OpenTelemetry span has its trace id already.
        trace_id = tracing::field::Empty,
        otel.name = span_name,
        otel.kind = "consumer",
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
        messaging.system = "bullmq",
        messaging.operation.type = "process",
        messaging.operation.name = "process",
        messaging.destination.name = queue,
        messaging.message.id = job_id,
        bullmq.queue.name = queue,
        bullmq.queue.operation = "process",
        bullmq.job.id = job_id,
        bullmq.job.name = job_name,
        bullmq.job.attempts.made = i64::from(attempt.saturating_sub(1)),
    );
    if let Some(parent) = carried {
        set_parent(&span, parent);
    }
    let own = context_of(&span);
    if let (None, Some(parent)) = (&own, carried) {
        span.record("trace_id", parent.trace_id());
    }
    let context = own.or_else(|| carried.cloned());
    (span, context)
}

/// `add <queue>.<job>` or `<operation> <queue>`, written only if a layer records it.
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

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const SPAN: &str = "00f067aa0ba902b7";

    #[tokio::test]
    async fn the_scope_sets_the_current_context() {
        assert_eq!(current(), None);
        let root = TraceContext::new_root();
        let inside = scope(root.clone(), async { current() }).await;
        assert_eq!(inside, Some(root));
    }

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

    #[test]
    fn hex_is_fixed_width_lower_case() {
        assert_eq!(HexId::<4>::of(0xab).as_str(), "00ab");
        assert_eq!(HexId::<32>::of(u128::MAX).as_str(), "f".repeat(32));
        assert!(HexId::<4>::parse_nonzero("0000").is_none());
        assert!(HexId::<4>::parse_nonzero("00Ab").is_none());
        assert_eq!(
            HexId::<4>::parse_nonzero("00ab").map(|h| h.0),
            Some(*b"00ab")
        );
    }
}
