//! The HTTP API: sign-up, coupons, the manual birthday scan, and job status.

mod auth;
mod birthdays;
mod dashboard;
mod error;
mod exports;
mod ignorable;
mod report_live;
mod reports;
mod users;
mod validate;

use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use queue_axum::{HealthRoutes, IdempotencyLayer, JobRoutes, PreferWaitLayer, QueueLayer};
use queue_core::{health::HealthSettings, inject_queue, Queue, QueueApp};

pub use birthdays::{SCAN_DAYS_AHEAD, SCAN_DAYS_BACK};
pub use error::ApiError;

use crate::db::Db;
use crate::jobs::exports::ExportSettings;
use crate::jobs::{Coupon, Email, Export, Report, EMAIL_QUEUE};

/// The longest a sign-up waits for its welcome email (`Prefer: wait=N`).
pub const MAX_SIGN_UP_WAIT: Duration = Duration::from_secs(10);

/// What handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The database.
    pub db: Db,
    /// First retry delay of welcome emails.
    pub welcome_backoff: Duration,
    /// The operator's bearer token; `None` disables operator actions.
    pub admin_token: Option<String>,
    /// The operator's token as an access policy: it counts wrong tokens per client
    /// address (shared by the dashboard, the admin routes and the operator actions),
    /// so that no route is a faster place to guess it.
    pub operator: Option<queue_axum::access::Credentials>,
    /// The time zone "today" is read in (birthdays, the scan window).
    pub tz: chrono_tz::Tz,
    /// How exports run.
    pub export: ExportSettings,
}

impl AppState {
    /// Today, in the service's time zone.
    pub fn today(&self) -> chrono::NaiveDate {
        chrono::Utc::now().with_timezone(&self.tz).date_naive()
    }
}

/// The queues request handlers add to.
#[inject_queue(axum)]
#[derive(Debug)]
pub struct Producers {
    /// Welcome emails.
    pub email: Queue<Email>,
    /// Birthday scans.
    pub coupon: Queue<Coupon>,
    /// Monthly reports.
    pub report: Queue<Report>,
    /// Exports.
    pub export: Queue<Export>,
}

/// The whole API, with the queue layer.
///
/// - `POST /users`: sign-up; a retry with the same `Idempotency-Key` header gets the
///   first answer (kept in Redis for an hour, sealed), not a 409. With `Prefer: wait=N` (up to
///   10 s), a welcome email sent in time is answered with its status (200).
/// - `GET /jobs/email/{id}`: a welcome job's state, progress, attempts and timestamps,
///   for the client that was given its `Location` (its id holds a random user id, so it
///   cannot be guessed). The other queues' jobs are the operator's: a coupon job's id
///   holds a user's id and birthday.
/// - `GET /admin/jobs/{queue}/{id}`: any queue's job, with the failure reason and
///   return value, for the operator (`Authorization: Bearer $ADMIN_TOKEN`).
/// - `POST /reports`, `GET /reports/{month}`: the monthly report, a flow of four
///   idempotent steps, and each step's state (operator only); `GET
///   /reports/{month}/events`, the same status live, as server-sent events.
/// - `POST /exports`, `GET /exports/{id}`, `DELETE /exports/{id}`: the users export,
///   with its timeout and cancellation (operator only).
/// - `GET /admin/metrics`: the Prometheus metrics, for a scraper sending the same
///   header.
/// - `/admin/queues`: the queue dashboard, for the operator (the same token, or HTTP
///   Basic with it as the password); mounted only when `ADMIN_TOKEN` is set.
/// - `GET /livez`, `GET /readyz`: the liveness and readiness probes (a worker wedged
///   for two minutes with jobs waiting fails liveness): the verdict for anyone, each
///   check for the operator's token.
pub fn router(app: &QueueApp, state: AppState) -> Result<Router, queue_core::Error> {
    let admin = JobRoutes::new()
        .include_failed_reason(true)
        .include_return_value(true)
        .router()
        .merge(queue_axum::metrics_route(app)?)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::operator_only,
        ));
    // The long work only an operator starts and watches.
    let operator_work = Router::new()
        .route("/reports", post(reports::create))
        .route("/reports/{month}", get(reports::status))
        .route("/reports/{month}/events", get(report_live::stream))
        .route("/exports", post(exports::create))
        .route(
            "/exports/{id}",
            get(exports::status).delete(exports::cancel),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::operator_only,
        ));
    let admin_token = state.admin_token.clone();
    let operator = state.operator.clone();
    // Anyone gets the probes' verdict; the operator also each check (Redis's memory,
    // the outbox's depth, each worker's last job), which tells a stranger too much.
    let mut probes =
        HealthRoutes::new(HealthSettings::new().wedged_after(Duration::from_secs(120)));
    if let Some(operator) = &state.operator {
        probes = probes.details_for(operator.clone());
    }
    // A retried sign-up gets its first answer (the same user and token), not a 409.
    let idempotent = IdempotencyLayer::new(app);
    // The public status route of welcome emails; a sign-up that waits (`Prefer: wait`)
    // is answered with what it shows.
    let public_status = JobRoutes::new().queues([EMAIL_QUEUE]);
    let waits = PreferWaitLayer::new(MAX_SIGN_UP_WAIT).status(public_status.clone());
    let mut api = Router::new()
        .route("/users", post(users::create).layer(waits).layer(idempotent))
        .route("/users/{id}/coupons", get(users::coupons))
        .route("/birthdays/run", post(birthdays::run))
        .merge(operator_work)
        .with_state(state)
        .merge(public_status.router())
        .merge(probes.router())
        .nest("/admin", admin);
    if let (Some(token), Some(operator)) = (admin_token, operator) {
        api = api.merge(dashboard::router(app, "/admin/queues", &token, operator));
    }
    Ok(api
        // Every error answer is JSON, axum's own (404, 405, a bad path) too.
        .layer(axum::middleware::map_response(queue_axum::json_errors))
        .layer(QueueLayer::new(app)))
}
