//! The welcome email: payload, producer options and processor.

use std::time::Duration;

use queue_core::prelude::*;
use queue_core::processor;
use serde::{Deserialize, Serialize};

use crate::mailer::{Mailer, Outgoing};

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

/// Sends welcome emails in batches, through the mailer's batch call: up to 50 a call,
/// or those that signed up within 20 ms of the first. Each job's return value is its
/// [`Delivery`](crate::mailer::Delivery); a message the mailer could not send fails its
/// own job, which is retried with its own attempts and backoff. Delivery is
/// at-least-once, so the mail log's unique idempotency key makes a second run a
/// successful no-op instead of a second email.
#[processor(
    super::Email,
    concurrency = 2,
    timeout = "30s",
    per_minute_metrics = 1440,
    batch(size = 50, wait = "20ms")
)]
pub async fn send_welcome(
    batch: Batch<WelcomeEmail>,
    mailer: Dep<Mailer>,
) -> Result<BatchResult, JobError> {
    let messages: Vec<Outgoing> = batch
        .iter()
        .map(|job| Outgoing {
            key: idempotency_key(&job.data.user_id),
            to: job.data.email.clone(),
            subject: "Welcome!".to_owned(),
            body: format!("Hello {}, welcome aboard!", job.data.name),
            attempt: job.attempt(),
        })
        .collect();
    let sent = mailer.send_many(&messages).await;
    let mut result = BatchResult::new();
    for (job, sent) in batch.iter().zip(sent) {
        let user_id = &job.data.user_id;
        match sent {
            Ok(delivery) => {
                // In the job's own span: its queue, id, attempt and trace.
                batch.span_of(job).in_scope(|| {
                    tracing::info!(%user_id, ?delivery, "welcome email handled");
                });
                result.complete(job, delivery);
            }
            Err(e) => {
                result.fail(job, JobError::retry(e));
            }
        }
    }
    Ok(result)
}
