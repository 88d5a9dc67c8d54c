//! The routes: `GET /jobs/{queue}/{id}` and its live stream.

use axum::routing::get;
use axum::Router;

use super::events;
use super::settings::JobRoutes;
use super::status::status;

/// The status route with default settings: `GET /jobs/{queue}/{id}` for every queue
/// the app knows, answering state, progress, attempts and timestamps only. Needs
/// [`QueueLayer`](crate::QueueLayer) on the router.
pub fn job_routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    JobRoutes::new().router()
}

impl JobRoutes {
    /// The router: the status at `/jobs/{queue}/{id}`, its live stream at
    /// `/jobs/{queue}/{id}/events`.
    pub fn router<S: Clone + Send + Sync + 'static>(self) -> Router<S> {
        Router::new()
            .route("/jobs/{queue}/{id}", get(status).with_state(self.clone()))
            .route(
                "/jobs/{queue}/{id}/events",
                get(events::stream).with_state(self),
            )
    }
}
