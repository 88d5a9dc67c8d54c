//! axum integration for `queue-core`: enqueue in a request handler, answer **202
//! Accepted** with where to look, serve the job's status, and shut down in the right
//! order.
//!
//! # Quick start
//!
//! A queue, a worker with retries, and a route that answers 202 (the README's quick
//! start, without the dashboard, which is the crate `queue-dashboard`):
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use axum::{routing::post, Json, Router};
//! use queue_axum::{Accepted, QueueError, QueueLayer};
//! use queue_core::prelude::*;
//!
//! #[derive(Serialize, Deserialize)]
//! struct WelcomeEmail { to: String }
//!
//! #[job_queue("email")]
//! enum Email {
//!     #[job("welcome")]
//!     Welcome(WelcomeEmail),
//! }
//!
//! #[processor(Email, concurrency = 5)]
//! async fn send_welcome(job: Job<WelcomeEmail>) -> Result<(), JobError> {
//!     println!("welcome, {}", job.data.to);
//!     Ok(())
//! }
//!
//! // An extractor, as the crate depends on queue-axum: a route takes it as an argument.
//! #[inject_queue]
//! struct Producers { email: Queue<Email> }
//!
//! async fn sign_up(producers: Producers, Json(to): Json<String>) -> Result<Accepted, QueueError> {
//!     let options = JobOptions::new().delay(Duration::from_secs(5));
//!     let job = producers.email.add_job(WelcomeEmail { to }, options).await?;
//!     Ok(job.into()) // 202, {"jobId":..}, Location: /jobs/email/<id>
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let retries = JobOptions::new()
//!         .attempts(5)
//!         .backoff(Backoff::exponential(Duration::from_secs(3)));
//!     let app = QueueApp::builder()
//!         .redis("redis://127.0.0.1:6379")
//!         .queue_defaults("email", retries)
//!         .build()
//!         .await?;
//!     let workers = app.start_workers().await?;
//!     let router = Router::new()
//!         .route("/users", post(sign_up))
//!         .merge(queue_axum::job_routes()) // GET /jobs/{queue}/{id}
//!         .layer(QueueLayer::new(&app));
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     // Stops accepting on SIGINT/SIGTERM, finishes requests, then stops the workers.
//!     queue_axum::serve(listener, router, Some(workers), Duration::from_secs(30)).await?;
//!     Ok(())
//! }
//! ```
//!
//! # The pieces
//!
//! - [`QueueLayer`] hands the app to the extractors: an `#[inject_queue]` struct (the
//!   way to take queues), [`Inject<T>`] (any other `FromApp` type), [`Queues`] (the
//!   whole app, for routes that pick queues at run time) and [`IdempotencyKey`]. A
//!   router without it answers 500, naming the layer.
//! - [`Accepted`] is the 202 answer; [`QueueError`] turns a `queue_core::Error` into 503
//!   with `Retry-After` (Redis down), 4xx (the client's mistake) or 500.
//! - [`IdempotencyLayer`] answers a retried request with the same `Idempotency-Key` with
//!   the first answer, kept in Redis, instead of doing the work again.
//! - [`job_routes`] and [`JobRoutes`] serve `GET /jobs/{queue}/{id}` and its live
//!   stream, `GET /jobs/{queue}/{id}/events`; [`PreferWaitLayer`] answers a request
//!   with `Prefer: wait=N` with its job's status when the job finishes in time; [`json_errors`]
//!   makes axum's own errors JSON; [`quote`] bounds what an error repeats of the input.
//! - [`serve`] serves with client time limits and shuts down in order: requests, then
//!   workers.
//! - [`access`]: the application's access decision for a request ([`access::Access`],
//!   ready-made Basic and bearer [`access::Credentials`]), and what a browser's request
//!   must not do with it ([`access::refusal`]); the dashboard (`queue-dashboard`) is
//!   guarded by it.
//! - With features: `metrics_route` (`metrics`), the request as an OpenTelemetry span
//!   (`opentelemetry`).
//!
//! # "`Handler<_, _>` is not implemented"
//!
//! `#[inject_queue]` makes its struct an extractor where the crate's `Cargo.toml` lists
//! `queue-axum` among its dependencies, under that name and not optional. Elsewhere (a
//! renamed or optional dependency, `axum = false`) a route that takes the struct does
//! not compile: the compiler says, at the `.route(..)` line, that the function does not
//! implement axum's `Handler`. Write `#[inject_queue(axum)]`, or take the struct as
//! [`Inject<T>`]. Adding `#[axum::debug_handler]` to the function (axum's feature
//! `macros`) makes the compiler name the argument at fault.
//!
//! ```compile_fail
//! use axum::{routing::post, Router};
//! use queue_core::prelude::*;
//!
//! #[inject_queue(axum = false)] // no extractor
//! struct Producers {
//!     #[queue("email")]
//!     email: Queue<String>,
//! }
//!
//! async fn sign_up(producers: Producers) -> &'static str { "ok" }
//!
//! let router: Router = Router::new().route("/users", post(sign_up));
//! ```
//!
//! # Traces
//!
//! Each request runs in a trace scope: the W3C trace context of its `traceparent`, or a
//! new trace. The jobs it adds carry the context in BullMQ's telemetry field, where Node's
//! `bullmq-otel` reads it too; the worker's `job` span carries the trace id. The
//! `x-request-id` response header echoes the client's own id, or gives the trace id.

// docs.rs builds with `--cfg docsrs` (Cargo.toml) and marks each feature-gated item.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod accepted;
pub mod access;
mod carried;
mod client;
mod error;
mod extract;
mod handover;
mod health;
mod idempotency;
mod json_errors;
mod layer;
mod limits;
#[cfg(feature = "metrics")]
mod metrics;
mod prefer_wait;
mod quote;
mod rejection;
mod routes;
mod serve;
#[cfg(test)]
mod test_support;
mod trace_context;

pub use accepted::{Accepted, DEFAULT_STATUS_PREFIX};
pub use error::{QueueError, RETRY_AFTER_SECONDS};
#[allow(deprecated)]
pub use extract::{Inject, QueueHandle, QueueName, Queues};
pub use health::HealthRoutes;
pub use idempotency::{
    IdempotencyKey, IdempotencyLayer, IdempotencyService, DEFAULT_IDEMPOTENCY_TTL,
    DEFAULT_MAX_NEW_KEYS_PER_MINUTE, IDEMPOTENCY_KEY_HEADER, REPLAYED_HEADER,
};
pub use json_errors::json_errors;
pub use layer::{QueueLayer, QueueService, QueueServiceFuture};
pub use limits::MAX_IDEMPOTENCY_KEY_LEN;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub use metrics::metrics_route;
pub use prefer_wait::{PreferWaitLayer, PreferWaitService, PREFERENCE_APPLIED};
pub use quote::{quote, MAX_QUOTED_CHARS};
pub use rejection::{
    IdempotencyKeyInFlight, IdempotencyKeyReused, InvalidIdempotencyKey, InvalidQueue,
    MissingIdempotencyKey, MissingQueueLayer, QueueRejection, TooManyIdempotencyKeys,
};
pub use routes::{
    job_routes, JobRoutes, DEFAULT_JOB_STREAM_IDLE, DEFAULT_JOB_STREAM_LIFETIME,
    DEFAULT_MAX_JOB_STREAMS, DEFAULT_MAX_STREAMS_PER_CLIENT, DEFAULT_MAX_STREAMS_PER_JOB,
    DEFAULT_STATUS_REDIS_WAIT,
};
pub use serve::{serve, serve_until, serve_with_limits, shutdown_signal, ServeLimits};
pub use trace_context::{MAX_REQUEST_ID_LEN, REQUEST_ID_HEADER};

pub use queue_core;

/// Not public API: what `#[inject_queue(axum)]` expands to.
#[doc(hidden)]
pub mod __private {
    pub use crate::extract::from_app;
    pub use axum::extract::FromRequestParts;
    pub use axum::http::request::Parts;
}

/// Builds a `FromApp` type from the request's app.
#[deprecated(
    since = "0.2.0",
    note = "an `#[inject_queue]` struct is an extractor itself, and `Inject<T>` makes any \
            other `FromApp` type one"
)]
pub fn from_app<T: queue_core::app::FromApp>(
    parts: &axum::http::request::Parts,
) -> Result<T, QueueRejection> {
    extract::from_app(parts)
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
                $crate::__private::from_app::<Self>(parts)
            }
        }
    };
}
