//! `QueueLayer`: puts the app into every request's extensions and runs the request
//! inside a trace scope, so the jobs it adds continue its trace.

use std::task::{Context, Poll};

use axum::http::{HeaderValue, Request, Response};
use futures::future::BoxFuture;
use queue_core::QueueApp;
use tower::{Layer, Service};

use queue_core::trace::{self, TraceContext};

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
    /// The trace a request runs in, and its span. With an OpenTelemetry layer recording
    /// the span, the span's context is the trace (continuing `incoming`, unless an
    /// outer OpenTelemetry span already parents it); otherwise `incoming`, or a new
    /// trace when the layer starts them.
    fn request_span(
        &self,
        incoming: Option<TraceContext>,
        request_id: Option<&str>,
    ) -> (Option<TraceContext>, Option<tracing::Span>) {
        // No span to record when there is no trace to give it.
        if incoming.is_none() && !self.start_traces && !trace::OPENTELEMETRY {
            return (None, None);
        }
        let span = tracing::info_span!(
            "request",
            trace_id = tracing::field::Empty,
            // Recorded only when the client sent one: no `request_id=""` in the logs.
            request_id = tracing::field::Empty,
        );
        if let Some(request_id) = request_id {
            span.record("request_id", request_id);
        }
        trace::set_parent_if_unparented(&span, incoming.as_ref());
        let context = trace::context_of(&span).or(incoming).or_else(|| {
            // An untraced request stays untraced unless OpenTelemetry traced it.
            self.start_traces.then(TraceContext::new_root)
        });
        if let Some(context) = &context {
            span.record("trace_id", context.trace_id());
        }
        (context, Some(span))
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for QueueService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

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
        // The clone that was made ready by `poll_ready` handles this request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let response = inner.call(request);
        Box::pin(async move {
            let mut response = match (context, span) {
                (Some(context), Some(span)) => {
                    tracing::Instrument::instrument(trace::scope(context, response), span).await?
                }
                _ => response.await?,
            };
            if let Some(value) = echo {
                response.headers_mut().entry(&REQUEST_ID).or_insert(value);
            }
            Ok(response)
        })
    }
}
