//! The probes as routes: `GET /livez` and `GET /readyz`, Kubernetes's names, answering
//! 200 when the app's [`HealthReport`] passes (a warning passes) and 503 when a check
//! fails. Anyone gets the verdict; the report's checks (Redis's memory, the outbox's
//! depth, each worker's last job) only a caller the application's access decision lets
//! see.

use std::sync::Arc;

use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use queue_core::{health::HealthReport, health::HealthSettings};

use crate::access::AccessPolicy;
use crate::extract::app_of;

/// The liveness and readiness routes, with the app's periods. Needs
/// [`QueueLayer`](crate::QueueLayer) on the router.
///
/// Every caller gets the status code and `{"status": "pass"}` (or `warn`, `fail`):
/// what a probe reads. The checks, with what was seen (counts, Redis's memory, when
/// each worker last took a job), tell a stranger how the service runs and how to hurt
/// it: they are shown to callers that [`details_for`](Self::details_for)'s policy lets
/// see, and to nobody by default.
///
/// ```
/// use std::time::Duration;
/// use axum::Router;
/// use queue_axum::access::Access;
/// use queue_axum::HealthRoutes;
/// use queue_core::health::HealthSettings;
///
/// let probes: Router = HealthRoutes::new(
///     HealthSettings::new().wedged_after(Duration::from_secs(120)),
/// )
/// // The operator's token shows each check; probes need none.
/// .details_for(Access::bearer("4f1c0b2e9d7a6c5b8e3f2a1d0c9b8a7f"))
/// .router();
/// // livenessProbe:  httpGet { path: /livez }
/// // readinessProbe: httpGet { path: /readyz }
/// ```
#[derive(Clone, Default)]
#[must_use]
pub struct HealthRoutes {
    settings: HealthSettings,
    details: Option<Arc<dyn AccessPolicy>>,
}

impl std::fmt::Debug for HealthRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthRoutes")
            .field("settings", &self.settings)
            .field("details", &self.details.is_some())
            .finish()
    }
}

impl HealthRoutes {
    /// The routes with these periods.
    pub fn new(settings: HealthSettings) -> Self {
        HealthRoutes {
            settings,
            details: None,
        }
    }

    /// Shows each check to the callers `policy` lets see
    /// ([`Access::can_see`](crate::access::Access::can_see)); the others get the
    /// verdict only.
    pub fn details_for(mut self, policy: impl AccessPolicy) -> Self {
        self.details = Some(Arc::new(policy));
        self
    }

    /// The router, at `/livez` and `/readyz`.
    pub fn router<S: Clone + Send + Sync + 'static>(self) -> Router<S> {
        Router::new()
            .route("/livez", get(live).with_state(self.clone()))
            .route("/readyz", get(ready).with_state(self))
    }

    fn shows_details(&self, parts: &Parts) -> bool {
        self.details
            .as_ref()
            .is_some_and(|policy| policy.decide(parts).can_see())
    }
}

async fn live(State(routes): State<HealthRoutes>, parts: Parts) -> Response {
    match app_of(&parts) {
        Ok(app) => answer(
            app.health(routes.settings).live().await,
            routes.shows_details(&parts),
        ),
        Err(rejection) => rejection.into_response(),
    }
}

async fn ready(State(routes): State<HealthRoutes>, parts: Parts) -> Response {
    match app_of(&parts) {
        Ok(app) => answer(
            app.health(routes.settings).ready().await,
            routes.shows_details(&parts),
        ),
        Err(rejection) => rejection.into_response(),
    }
}

fn answer(report: HealthReport, details: bool) -> Response {
    let status = if report.is_healthy() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut response = match details {
        true => (status, Json(serde_json::json!(report))).into_response(),
        false => (status, Json(serde_json::json!({ "status": report.status }))).into_response(),
    };
    // A probe's answer is of this instant.
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
