//! A service as a user writes it after reading the README: a declared queue, a processor
//! with concurrency, an `#[inject_queue(axum)]` producer behind a route answering 202, a
//! retry with backoff, a `failed` listener, and the dashboard behind a token.
//! `scripts/downstream.sh` builds it from the packaged crates and drives it over HTTP.

use std::time::Duration;

use axum::{routing::post, Json, Router};
use queue_axum::{Accepted, JobRoutes, QueueError, QueueLayer};
use queue_core::prelude::*;
use queue_dashboard::{Access, Dashboard};

/// Whom to greet.
#[derive(Debug, Serialize, Deserialize)]
pub struct Greeting {
    pub to: String,
}

/// The `greetings` queue and its one job.
#[job_queue("greetings")]
pub enum Greetings {
    /// A greeting; the handler returns the text it sent.
    #[job("greet", output = String)]
    Greet(Greeting),
}

/// Fails the first attempt, as a flaky mail server would, and succeeds on the retry.
#[processor(Greetings, concurrency = 4)]
async fn greet(job: Job<Greeting>) -> Result<String, JobError> {
    if job.attempt() == 1 {
        return Err(JobError::retry("the mail server is busy"));
    }
    Ok(format!("hello, {}", job.data.to))
}

/// Every failed attempt, as a NestJS `@OnWorkerEvent('failed')` would see it.
#[on_worker_event(Greetings, failed)]
async fn greeting_failed(event: WorkerEvent) {
    if let WorkerEvent::Failed {
        job_id,
        attempt,
        reason,
        ..
    } = event
    {
        println!("failed listener: job {job_id} attempt {attempt}: {reason}");
    }
}

/// The producer a route takes as an extractor.
#[inject_queue(axum)]
struct GreetingService {
    greetings: Queue<Greetings>,
}

async fn create_greeting(
    service: GreetingService,
    Json(greeting): Json<Greeting>,
) -> Result<Accepted, QueueError> {
    let options = JobOptions::new()
        .attempts(3)
        .backoff(Backoff::fixed(Duration::from_millis(200)));
    let job = service.greetings.add_job(greeting, options).await?;
    Ok(job.into())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redis = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = std::env::var("QUEUE_PREFIX").unwrap_or_else(|_| "bull".into());
    let app = QueueApp::builder()
        .redis(redis)
        .prefix(prefix)
        .build()
        .await?;
    let workers = app.start_workers().await?;
    let token = std::env::var("ADMIN_TOKEN").unwrap_or_else(|_| "change-me".into());
    let dashboard = Dashboard::new(&app, Access::bearer(token));
    let router = Router::new()
        .route("/greetings", post(create_greeting))
        .merge(JobRoutes::new().include_return_value(true).router())
        .merge(dashboard.mount("/admin/queues"))
        .layer(QueueLayer::new(&app));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("listening on {}", listener.local_addr()?);
    queue_axum::serve(listener, router, Some(workers), Duration::from_secs(5)).await?;
    Ok(())
}
