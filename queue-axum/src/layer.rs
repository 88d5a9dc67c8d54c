//! `QueueLayer`: puts the app into every request's extensions and runs the request
//! inside a trace scope, so the jobs it adds carry its trace id.

use std::task::{Context, Poll};

use axum::http::{HeaderValue, Request, Response};
use futures::future::BoxFuture;
use queue_core::QueueApp;
use tower::{Layer, Service};

/// The request header that carries (or receives) the request id.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

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
        let trace_id = trace_id_of(&request).or_else(|| {
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

/// The W3C `traceparent` trace id, else `x-request-id`.
fn trace_id_of<B>(request: &Request<B>) -> Option<String> {
    let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
    let from_traceparent = header("traceparent").and_then(|tp| {
        let mut parts = tp.split('-');
        let (_version, trace) = (parts.next()?, parts.next()?);
        (trace.len() == 32 && trace.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| trace.to_owned())
    });
    from_traceparent.or_else(|| {
        header(REQUEST_ID_HEADER)
            .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
            .map(str::to_owned)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, &str)]) -> Request<()> {
        let mut builder = Request::builder();
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn trace_ids_come_from_traceparent_then_request_id() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            trace_id_of(&request(&[("traceparent", tp), ("x-request-id", "r1")])).as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert_eq!(
            trace_id_of(&request(&[("x-request-id", "r1")])).as_deref(),
            Some("r1")
        );
        assert_eq!(trace_id_of(&request(&[("x-request-id", "bad id")])), None);
        assert_eq!(trace_id_of(&request(&[])), None);
    }
}
