//! The welcome-email / birthday-coupon service, as a library so that its tests can
//! start it in-process. `main.rs` only reads the environment and calls [`run`].

pub mod config;
pub mod db;
pub mod http;
pub mod jobs;
pub mod mailer;
pub mod telemetry;

use std::time::Duration;

use queue_core::metrics::Metrics;
use queue_core::{app::Registrations, options::Schedule, JobOptions, QueueApp, Workers};

use crate::config::{Config, Role};
use crate::db::Db;
use crate::jobs::coupons::{BirthdayScan, ScanZone, DAILY_CRON, SCHEDULER_ID};
use crate::jobs::reports::ReportRecipient;
use crate::mailer::{FailurePolicy, Mailer};

/// How long active jobs get to finish at shutdown.
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(30);

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A bad environment variable.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// The database could not be opened or migrated.
    #[error("database ({url}): {source}")]
    Db {
        /// The URL.
        url: String,
        /// The cause.
        source: sqlx::Error,
    },
    /// Redis or the registrations.
    #[error(transparent)]
    Queue(#[from] queue_core::Error),
    /// The port.
    #[error("cannot listen on port {port}: {source}")]
    Listen {
        /// The port.
        port: u16,
        /// The cause.
        source: std::io::Error,
    },
}

/// A built service: its queue app, database and router, not yet serving.
#[derive(Debug)]
pub struct Service {
    /// The queue app.
    pub app: QueueApp,
    /// The database.
    pub db: Db,
    /// The HTTP API.
    pub router: axum::Router,
}

/// Connects to the database (migrating it) and Redis, checks the registrations, and
/// (for the worker roles) upserts the daily birthday scheduler.
pub async fn build(
    config: &Config,
    failures: FailurePolicy,
    registrations: Registrations,
) -> Result<Service, StartError> {
    let db = Db::connect(&config.database_url)
        .await
        .map_err(|source| StartError::Db {
            url: config.database_url.clone(),
            source,
        })?;
    let app = match &config.redis_cluster_nodes {
        Some(nodes) => QueueApp::builder().redis_cluster(nodes.clone()),
        None => QueueApp::builder().redis(&config.redis_url),
    };
    let app = app
        .prefix(&config.queue_prefix)
        // The mail and coupon queues hold addresses and birthdays: sealed in Redis
        // (their declarations say `encrypted`), under these keys.
        .keyring(config.keys.keyring().map_err(queue_core::Error::from)?)
        .registrations(registrations)
        .provide(db.clone())
        .provide(Mailer::new(db.clone(), failures))
        .provide(ScanZone(config.tz))
        .provide(config.export)
        .provide(ReportRecipient(config.report_email.clone()))
        // Jobs written with the application's data commit with it; the relay moves
        // them to Redis (in every role, so that no process leaves rows behind).
        .outbox(db.outbox())
        // Counted and timed per queue and job name; scraped at `/admin/metrics`.
        .metrics(Metrics::new())
        // Each worker process on the dashboard's workers page: host, pid, queues, busy.
        .process_roster(true)
        .build()
        .await?;
    if config.role != Role::Web {
        // Idempotent: restarts and replicas keep one scheduler and one next scan.
        app.queue_of::<jobs::Coupon>()?
            .upsert_scheduler_of(
                SCHEDULER_ID,
                Schedule::cron(DAILY_CRON).tz(config.tz.name()),
                BirthdayScan::default(),
                JobOptions::new().attempts(3),
            )
            .await?;
    }
    if config.admin_token.is_none() {
        tracing::warn!("ADMIN_TOKEN is not set: operator actions (the manual birthday scan, job details, anyone's coupons) are disabled, and the queue dashboard (/admin/queues) is not mounted");
    }
    let state = http::AppState {
        db: db.clone(),
        welcome_backoff: config.welcome_backoff,
        admin_token: config.admin_token.clone(),
        operator: config
            .admin_token
            .as_deref()
            .map(queue_axum::access::Access::bearer),
        tz: config.tz,
        export: config.export,
    };
    let router = http::router(&app, state)?;
    Ok(Service { app, db, router })
}

/// Runs the service for `config.role` until SIGINT/SIGTERM.
pub async fn run(config: Config) -> Result<(), StartError> {
    let failures = if config.mail_fail_rate > 0.0 {
        FailurePolicy::Rate(config.mail_fail_rate)
    } else {
        FailurePolicy::Never
    };
    let service = build(&config, failures, Registrations::All).await?;
    let workers: Option<Workers> = match config.role {
        Role::Web => None,
        Role::Worker | Role::All => Some(service.app.start_workers().await?),
    };
    if config.role == Role::Worker {
        tracing::info!("worker running; no HTTP in this role");
        queue_axum::shutdown_signal().await;
        if let Some(workers) = workers {
            workers.shutdown(SHUTDOWN_DEADLINE).await;
        }
        return Ok(());
    }
    let port = config.port;
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", port))
        .await
        .map_err(|source| StartError::Listen { port, source })?;
    tracing::info!(port, role = ?config.role, "welcome-app listening");
    queue_axum::serve(listener, service.router, workers, SHUTDOWN_DEADLINE)
        .await
        .map_err(|source| StartError::Listen { port, source })?;
    Ok(())
}
