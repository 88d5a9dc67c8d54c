//! axum integration for `queue-core`: enqueue in a request handler, answer **202
//! Accepted** with where to look, serve the job's status, and shut down in the right
//! order.
//!
//! ```no_run
//! use std::time::Duration;
//! use axum::{routing::post, Json, Router};
//! use queue_axum::{job_routes, Accepted, IdempotencyKey, QueueError, QueueLayer};
//! use queue_core::prelude::*;
//! use queue_core::inject_queue;
//!
//! #[derive(Serialize, Deserialize)]
//! struct WelcomeEmail { to: String }
//!
//! #[inject_queue(axum)]
//! struct EmailService {
//!     #[queue("email")]
//!     email: Queue<WelcomeEmail>,
//! }
//!
//! // The whole handler: enqueue, answer 202.
//! async fn signup(svc: EmailService, key: IdempotencyKey, Json(to): Json<String>) -> Result<Accepted, QueueError> {
//!     let opts = JobOptions::new().attempts(5).job_id(key.job_id("signup", "welcome").unwrap_or_else(|| format!("welcome-{to}")));
//!     let job = svc.email.add("welcome", WelcomeEmail { to }, opts).await?;
//!     Ok(job.into())
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let app = QueueApp::builder().build().await?;
//!     let workers = app.start_workers().await?;
//!     let router = Router::new()
//!         .route("/users", post(signup))
//!         .merge(job_routes())                  // GET /jobs/{queue}/{id}
//!         .layer(QueueLayer::new(&app));
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     // Stops accepting on SIGINT/SIGTERM, finishes requests, then stops the workers.
//!     queue_axum::serve(listener, router, Some(workers), Duration::from_secs(30)).await?;
//!     Ok(())
//! }
//! ```
//!
//! Each request runs in a trace scope: the W3C trace context of its `traceparent`, or a
//! new trace. The jobs it adds carry the context in BullMQ's telemetry field, where Node's
//! `bullmq-otel` reads it too; the worker's `job` span carries the trace id. The
//! `x-request-id` response header echoes the client's own id, or gives the trace id.

// docs.rs builds with `--cfg docsrs` (Cargo.toml) and marks each feature-gated item.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod accepted;
#[cfg(feature = "dashboard")]
#[cfg_attr(docsrs, doc(cfg(feature = "dashboard")))]
pub mod dashboard;
mod error;
mod extract;
mod json_errors;
mod layer;
mod limits;
#[cfg(feature = "metrics")]
mod metrics;
mod rejection;
mod routes;
mod serve;
mod trace_context;

/// What the unit tests of several modules share.
#[cfg(test)]
mod test_support {
    use axum::http::HeaderMap;

    /// A header map of `pairs`.
    pub(crate) fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, value.parse().unwrap());
        }
        headers
    }
}

pub use accepted::{Accepted, DEFAULT_STATUS_PREFIX};
pub use error::{QueueError, RETRY_AFTER_SECONDS};
pub use extract::{
    from_app, IdempotencyKey, Inject, QueueHandle, QueueName, Queues, IDEMPOTENCY_KEY_HEADER,
};
pub use json_errors::json_errors;
pub use layer::{QueueLayer, QueueService};
pub use limits::MAX_IDEMPOTENCY_KEY_LEN;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub use metrics::metrics_route;
pub use rejection::{InvalidIdempotencyKey, InvalidQueue, MissingQueueLayer, QueueRejection};
pub use routes::{job_routes, JobRoutes};
pub use serve::{serve, serve_until, serve_with_limits, shutdown_signal, ServeLimits};
pub use trace_context::{MAX_REQUEST_ID_LEN, REQUEST_ID_HEADER};

pub use queue_core;

/// Not public API: what `#[inject_queue(axum)]` expands to.
#[doc(hidden)]
pub mod __private {
    pub use axum::extract::FromRequestParts;
    pub use axum::http::request::Parts;
}

/// Not public API: the `FromRequestParts` impl of an `#[inject_queue(axum)]` struct.
#[doc(hidden)]
#[macro_export]
macro_rules! __impl_from_request_parts {
    ($ty:ty) => {
        impl<S: ::core::marker::Send + ::core::marker::Sync> $crate::__private::FromRequestParts<S>
            for $ty
        {
            type Rejection = $crate::QueueRejection;

            async fn from_request_parts(
                parts: &mut $crate::__private::Parts,
                _state: &S,
            ) -> ::core::result::Result<Self, Self::Rejection> {
                $crate::from_app::<Self>(parts)
            }
        }
    };
}
