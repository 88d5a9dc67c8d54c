//! `GET /metrics`: the app's Prometheus metrics (feature `metrics`).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use queue_core::metrics::{Metrics, CONTENT_TYPE};
use queue_core::QueueApp;

use crate::error::QueueError;

/// `GET /metrics` in the OpenMetrics text format, for a Prometheus scrape: the app's
/// [`Metrics`], with each queue's depth read when scraped (cached for
/// [`DEPTH_CACHE_FOR`](queue_core::metrics::DEPTH_CACHE_FOR)).
///
/// The route shows queue and job names and counts, never job data; it is still
/// operational detail, so mount it where only your scraper reaches it (an internal
/// listener, or behind your own access check), as the example does.
///
/// Refused (at start-up, not at the first scrape) when the app records no metrics.
///
/// ```no_run
/// # async fn demo() -> queue_core::Result<()> {
/// use axum::Router;
/// use queue_core::{metrics::Metrics, QueueApp};
///
/// let app = QueueApp::builder().metrics(Metrics::new()).build().await?;
/// let internal: Router = queue_axum::metrics_route(&app)?;
/// # Ok(()) }
/// ```
pub fn metrics_route<S: Clone + Send + Sync + 'static>(
    app: &QueueApp,
) -> Result<Router<S>, queue_core::Error> {
    let metrics = app
        .metrics()
        .cloned()
        .ok_or_else(|| queue_core::Error::InvalidOption {
            option: "metrics",
            reason: "the app records no metrics: build it with `.metrics(Metrics::new())`".into(),
        })?;
    let app = app.clone();
    Ok(Router::new().route(
        "/metrics",
        get(move || {
            let (app, metrics) = (app.clone(), metrics.clone());
            async move { scrape(&app, &metrics).await }
        }),
    ))
}

async fn scrape(app: &QueueApp, metrics: &Metrics) -> Response {
    match metrics.render(app).await {
        Ok(text) => (StatusCode::OK, [(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(e) => QueueError::from(e).into_response(),
    }
}
