//! `QueueLayer`: puts the app into every request's extensions and runs the request
//! inside a trace scope, so the jobs it adds carry its trace id.

use std::task::{Context, Poll};

use axum::http::{HeaderValue, Request, Response};
use futures::future::BoxFuture;
use queue_core::QueueApp;
use tower::{Layer, Service};

use crate::trace_context::{trace_id_of, REQUEST_ID_HEADER};

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
    mint_request_ids: bool,
}

impl QueueLayer {
    /// A layer for `app`.
    pub fn new(app: &QueueApp) -> Self {
        QueueLayer {
            app: app.clone(),
            mint_request_ids: true,
        }
    }

    /// Whether a request that arrives with neither `traceparent` nor `x-request-id` gets
    /// a new id (the default: `true`). The id is echoed in `x-request-id` and carried
    /// by the jobs the request adds, which costs one more Redis write per job; with
    /// `false` such requests run without a trace id, and so do their jobs.
    pub fn mint_request_ids(mut self, mint: bool) -> Self {
        self.mint_request_ids = mint;
        self
    }
}

impl<S> Layer<S> for QueueLayer {
    type Service = QueueService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        QueueService {
            inner,
            app: self.app.clone(),
            mint_request_ids: self.mint_request_ids,
        }
    }
}

/// The service [`QueueLayer`] wraps around the router.
#[derive(Debug, Clone)]
pub struct QueueService<S> {
    inner: S,
    app: QueueApp,
    mint_request_ids: bool,
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
        let trace_id = trace_id_of(request.headers()).or_else(|| {
            self.mint_request_ids
                .then(|| uuid::Uuid::new_v4().simple().to_string())
        });
        // The clone that was made ready by `poll_ready` handles this request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let response = inner.call(request);
        Box::pin(async move {
            let Some(trace_id) = trace_id else {
                return response.await;
            };
            let span = tracing::info_span!("request", trace_id = %trace_id);
            let mut response = tracing::Instrument::instrument(
                queue_core::trace::scope(trace_id.clone(), response),
                span,
            )
            .await?;
            if let Ok(value) = HeaderValue::from_str(&trace_id) {
                response
                    .headers_mut()
                    .entry(REQUEST_ID_HEADER)
                    .or_insert(value);
            }
            Ok(response)
        })
    }
}
