//! The HTTP API: sign-up, coupons, the manual birthday scan, and job status.

mod birthdays;
mod error;
mod users;
mod validate;

use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use queue_axum::{job_routes, QueueLayer};
use queue_core::{inject_queue, Queue, QueueApp};

pub use error::ApiError;

use crate::db::Db;
use crate::jobs::coupons::BirthdayScan;
use crate::jobs::email::WelcomeEmail;

/// What handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The database.
    pub db: Db,
    /// First retry delay of welcome emails.
    pub welcome_backoff: Duration,
}

/// The queues request handlers add to.
#[inject_queue(axum)]
#[derive(Debug)]
pub struct Producers {
    /// Welcome emails.
    #[queue("email")]
    pub email: Queue<WelcomeEmail>,
    /// Birthday scans.
    #[queue("coupon")]
    pub coupon: Queue<BirthdayScan>,
}

/// The whole API, with the queue layer.
pub fn router(app: &QueueApp, state: AppState) -> Router {
    Router::new()
        .route("/users", post(users::create))
        .route("/users/{id}/coupons", get(users::coupons))
        .route("/birthdays/run", post(birthdays::run))
        .with_state(state)
        .merge(job_routes())
        .layer(QueueLayer::new(app))
}
