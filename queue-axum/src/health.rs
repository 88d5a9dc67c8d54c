//! The probes as routes: `GET /livez` and `GET /readyz`, Kubernetes's names, answering
//! the app's [`HealthReport`] as JSON with 200 when it passes (a warning passes) and
//! 503 when a check fails.

use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use queue_core::{health::HealthReport, health::HealthSettings};

use crate::extract::app_of;

/// The liveness and readiness routes, with the app's periods. Needs
/// [`QueueLayer`](crate::QueueLayer) on the router.
///
/// The reports name queues and what was seen (counts, Redis's memory), never a job's
/// data; mount them where your probes reach them.
///
/// ```
/// use std::time::Duration;
/// use axum::Router;
/// use queue_axum::HealthRoutes;
/// use queue_core::health::HealthSettings;
///
/// let probes: Router = HealthRoutes::new(
///     HealthSettings::new().wedged_after(Duration::from_secs(120)),
/// )
/// .router();
/// // livenessProbe:  httpGet { path: /livez }
/// // readinessProbe: httpGet { path: /readyz }
/// ```
#[derive(Debug, Clone, Copy, Default)]
#[must_use]
pub struct HealthRoutes {
    settings: HealthSettings,
}

impl HealthRoutes {
    /// The routes with these periods.
    pub fn new(settings: HealthSettings) -> Self {
        HealthRoutes { settings }
    }

    /// The router, at `/livez` and `/readyz`.
    pub fn router<S: Clone + Send + Sync + 'static>(self) -> Router<S> {
        Router::new()
            .route("/livez", get(live).with_state(self))
            .route("/readyz", get(ready).with_state(self))
    }
}

async fn live(State(routes): State<HealthRoutes>, parts: Parts) -> Response {
    match app_of(&parts) {
        Ok(app) => answer(app.health(routes.settings).live().await),
        Err(rejection) => rejection.into_response(),
    }
}

async fn ready(State(routes): State<HealthRoutes>, parts: Parts) -> Response {
    match app_of(&parts) {
        Ok(app) => answer(app.health(routes.settings).ready().await),
        Err(rejection) => rejection.into_response(),
    }
}

fn answer(report: HealthReport) -> Response {
    let status = if report.is_healthy() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut response = (status, Json(report)).into_response();
    // A probe's answer is of this instant.
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
