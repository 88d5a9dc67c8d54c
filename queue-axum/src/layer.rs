//! `QueueLayer`: puts the app into every request's extensions and runs the request
//! inside a trace scope, so the jobs it adds continue its trace.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use axum::http::{HeaderValue, Request, Response};
use pin_project_lite::pin_project;
use queue_core::trace::{self, Scoped, TraceContext};
use queue_core::QueueApp;
use tower::{Layer, Service};

use crate::trace_context::{request_id_of, trace_context_of, REQUEST_ID};

/// A tower layer that makes the app's queues available to handlers and extractors.
/// Works with any router state.
///
/// ```no_run
/// # async fn demo(app: queue_core::QueueApp) {
/// use axum::{routing::get, Router};
/// use queue_axum::{job_routes, QueueLayer};
///
/// let router: Router = Router::new()
///     .route("/health", get(|| async { "ok" }))
///     .merge(job_routes())
///     .layer(QueueLayer::new(&app));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct QueueLayer {
    app: QueueApp,
    start_traces: bool,
}

impl QueueLayer {
    /// A layer for `app`.
    pub fn new(app: &QueueApp) -> Self {
        QueueLayer {
            app: app.clone(),
            start_traces: true,
        }
    }

    /// Whether a request that arrives without a valid `traceparent` starts a new trace
    /// (the default: `true`). Its trace id is echoed in `x-request-id` when the request
    /// brought none, and the jobs it adds carry the trace in BullMQ's telemetry field,
    /// in the add itself. With `false`, such requests and their jobs run untraced.
    ///
    /// A request's own `x-request-id` is echoed and logged with the request's span;
    /// it is not a trace id, so jobs do not carry it.
    ///
    /// With the `opentelemetry` feature and a `tracing-opentelemetry` layer in the
    /// subscriber, the `request` span is an OpenTelemetry span that continues the
    /// request's `traceparent` (unless an outer OpenTelemetry span, a `TraceLayer`'s
    /// say, already parents it), and its context is the trace: OpenTelemetry's sampler,
    /// not this switch, then decides what is traced.
    pub fn start_traces(mut self, mint: bool) -> Self {
        self.start_traces = mint;
        self
    }
}

impl<S> Layer<S> for QueueLayer {
    type Service = QueueService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        QueueService {
            inner,
            app: self.app.clone(),
            start_traces: self.start_traces,
        }
    }
}

/// The service [`QueueLayer`] wraps around the router.
#[derive(Debug, Clone)]
pub struct QueueService<S> {
    inner: S,
    app: QueueApp,
    start_traces: bool,
}

impl<S> QueueService<S> {
    /// The trace a request runs in, and its span when a subscriber records it. With an
    /// OpenTelemetry layer recording the span, the span's context is the trace
    /// (continuing `incoming`, unless an outer OpenTelemetry span already parents it);
    /// otherwise `incoming`, or a new trace when the layer starts them.
    fn request_span(
        &self,
        incoming: Option<TraceContext>,
        request_id: Option<&str>,
    ) -> (Option<TraceContext>, Option<tracing::Span>) {
        // No span to record when there is no trace to give it.
        if incoming.is_none() && !self.start_traces && !trace::OPENTELEMETRY {
            return (None, None);
        }
        // Nobody could record a span: none is made (its fields, and `tracing`'s `log`
        // feature's questions to `log`, cost every request).
        let span = if trace::subscriber_installed() {
            tracing::info_span!(
                "request",
                trace_id = tracing::field::Empty,
                // Recorded only when the client sent one: no `request_id=""` in the logs.
                request_id = tracing::field::Empty,
            )
        } else {
            tracing::Span::none()
        };
        // No span, or the subscriber filters it out: the trace still reaches the jobs
        // through the scope, and no poll enters a span for nothing.
        if span.is_disabled() {
            return (incoming.or_else(|| self.new_trace()), None);
        }
        if let Some(request_id) = request_id {
            span.record("request_id", request_id);
        }
        trace::set_parent_if_unparented(&span, incoming.as_ref());
        let context = trace::context_of(&span)
            .or(incoming)
            .or_else(|| self.new_trace());
        if let Some(context) = &context {
            span.record("trace_id", context.trace_id());
        }
        (context, Some(span))
    }

    /// A new trace for a request that brought none, when the layer starts them.
    fn new_trace(&self) -> Option<TraceContext> {
        self.start_traces.then(TraceContext::new_root)
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for QueueService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = QueueServiceFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        request.extensions_mut().insert(self.app.clone());
        let headers = request.headers();
        let incoming = trace_context_of(headers);
        let request_id = request_id_of(headers).cloned();
        // Its shape was checked: plain ASCII.
        let request_id_text = request_id.as_ref().and_then(|id| id.to_str().ok());
        let (context, span) = self.request_span(incoming, request_id_text);
        // Echoed as the client sent it, or the trace id for a client that sent none
        // (hex digits: always a valid header value).
        let echo = request_id.or_else(|| {
            let context = context.as_ref()?;
            HeaderValue::from_str(context.trace_id()).ok()
        });
        // Called here, not inside the response future, so the service `poll_ready`
        // made ready handles the request itself: no clone of it (for a route, a box)
        // per request.
        let response = self.inner.call(request);
        let traced = match context {
            Some(context) => Traced::Scoped {
                future: trace::scope(context, response),
            },
            None => Traced::Plain { future: response },
        };
        QueueServiceFuture { traced, span, echo }
    }
}

pin_project! {
    /// The response future of [`QueueService`]: the inner service's, run in the
    /// request's trace (and span, entered around each poll), with `x-request-id` added
    /// to the response. A named type rather than a box: axum boxes a route's future
    /// already, and a second box of a large future costs every request an allocation
    /// and a copy.
    #[must_use = "futures do nothing unless polled"]
    pub struct QueueServiceFuture<F> {
        #[pin]
        traced: Traced<F>,
        span: Option<tracing::Span>,
        echo: Option<HeaderValue>,
    }

    impl<F> PinnedDrop for QueueServiceFuture<F> {
        // A request cut off (its client gone) drops the handler's future: what that
        // logs belongs to the request's span too.
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            let _entered = this.span.as_ref().map(tracing::Span::enter);
            this.traced.set(Traced::Dropped);
        }
    }
}

pin_project! {
    /// How a request's future runs: untraced, or in its trace's scope; `Dropped` only
    /// while the whole future is dropped.
    #[project = TracedProjection]
    enum Traced<F> {
        Plain { #[pin] future: F },
        Scoped { #[pin] future: Scoped<F> },
        Dropped,
    }
}

impl<F, ResBody, E> Future for QueueServiceFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.as_ref().map(tracing::Span::enter);
        let mut response = ready!(match this.traced.project() {
            TracedProjection::Plain { future } => future.poll(cx),
            TracedProjection::Scoped { future } => future.poll(cx),
            // Set only by `drop`, after which nothing polls.
            TracedProjection::Dropped => return Poll::Pending,
        })?;
        if let Some(value) = this.echo.take() {
            response.headers_mut().entry(&REQUEST_ID).or_insert(value);
        }
        Poll::Ready(Ok(response))
    }
}

impl<F> std::fmt::Debug for QueueServiceFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueServiceFuture")
            .field("echo", &self.echo)
            .finish_non_exhaustive()
    }
}
