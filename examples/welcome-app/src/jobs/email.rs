//! The welcome email: payload, producer options and processor.

use std::time::Duration;

use queue_core::prelude::*;
use queue_core::processor;
use serde::{Deserialize, Serialize};

use crate::mailer::{Delivery, Mailer};

/// Data of a `welcome` job on queue `email`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WelcomeEmail {
    /// The new user's public id.
    pub user_id: String,
    /// Where to send.
    pub email: String,
    /// How to greet.
    pub name: String,
}

/// The job id of a user's welcome email: `welcome-<public id>` (BullMQ refuses `:`).
/// The public id is random and unique for ever, so a fresh or restored database never
/// meets the job of an earlier user with the same row id.
pub fn job_id(user_id: &str) -> String {
    format!("welcome-{user_id}")
}

/// The mail log's idempotency key of a user's welcome email.
pub fn idempotency_key(user_id: &str) -> String {
    format!("welcome:{user_id}")
}

/// How welcome jobs are added: dedup by id, 5 attempts, exponential backoff from
/// `backoff` (3 s in production), keep the last 100 completed and 1000 failed.
pub fn options(user_id: &str, backoff: Duration) -> JobOptions {
    JobOptions::new()
        .job_id(job_id(user_id))
        .attempts(5)
        .backoff(Backoff::exponential(backoff))
        .remove_on_complete(Retention::Last(100))
        .remove_on_fail(Retention::Last(1000))
}

/// Sends the welcome email. Delivery is at-least-once, so the mail log's unique
/// idempotency key makes a second run a successful no-op instead of a second email.
#[processor(
    super::Email,
    concurrency = 5,
    timeout = "30s",
    per_minute_metrics = 1440
)]
pub async fn send_welcome(
    job: Job<WelcomeEmail>,
    mailer: Dep<Mailer>,
) -> Result<Delivery, JobError> {
    let WelcomeEmail {
        user_id,
        email,
        name,
    } = &job.data;
    let body = format!("Hello {name}, welcome aboard!");
    let delivery = mailer
        .send(
            &idempotency_key(user_id),
            email,
            "Welcome!",
            &body,
            job.attempt(),
        )
        .await?;
    tracing::info!(%user_id, ?delivery, "welcome email handled");
    Ok(delivery)
}
