//! What a handler's `?` accepts: `anyhow::Result` and `Box<dyn Error + Send + Sync>`
//! beside any `std::error::Error`, each a retryable failure whose stored reason keeps
//! the whole chain of causes.

use anyhow::Context as _;
use queue_core::{Job, JobError, JobOptions, JobState, Processor};
use queue_tests::{wait_for_state, TestRedis, SOON};

fn read_config(path: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading the mail settings at {path}"))
}

fn parse_port(text: &str) -> Result<u16, Box<dyn std::error::Error + Send + Sync>> {
    Ok(text.trim().parse::<u16>()?)
}

/// Fails every attempt through `anyhow`'s `?`.
async fn with_anyhow(_job: Job<String>) -> Result<usize, JobError> {
    let settings = read_config("/nonexistent/queue-tests/mail.toml")?;
    Ok(settings.len())
}

/// Fails every attempt through a boxed error's `?`.
async fn with_box(job: Job<String>) -> Result<u16, JobError> {
    let port = parse_port(&job.data)?;
    Ok(port)
}

#[tokio::test]
async fn question_mark_on_anyhow_and_boxed_errors_fails_the_attempt_retryably_with_every_cause() {
    let redis = TestRedis::new("handler-errors");
    let app = redis
        .app(|b| {
            b.processor(
                Processor::new("errors")
                    .job("anyhow", with_anyhow)
                    .job("boxed", with_box),
            )
        })
        .await;
    let q = app.queue::<String>("errors").unwrap();
    let retry_once = || JobOptions::new().attempts(2);
    q.add("anyhow", String::new(), retry_once().job_id("anyhow-1"))
        .await
        .unwrap();
    q.add("boxed", "not a port".into(), retry_once().job_id("boxed-1"))
        .await
        .unwrap();
    let workers = app.start_workers().await.unwrap();

    // Retryable: both attempts ran; the reason is the context, then its cause.
    wait_for_state(&q, "anyhow-1", JobState::Failed, SOON).await;
    let failed = q.get_job("anyhow-1").await.unwrap().unwrap();
    assert_eq!((failed.attempts_made, failed.max_attempts), (2, 2));
    assert_eq!(
        failed.failed_reason.as_deref(),
        Some(
            "reading the mail settings at /nonexistent/queue-tests/mail.toml: \
             No such file or directory (os error 2)"
        )
    );

    // Retryable too: both attempts ran, and the reason is the parse error's.
    wait_for_state(&q, "boxed-1", JobState::Failed, SOON).await;
    let failed = q.get_job("boxed-1").await.unwrap().unwrap();
    assert_eq!((failed.attempts_made, failed.max_attempts), (2, 2));
    assert_eq!(
        failed.failed_reason.as_deref(),
        Some("invalid digit found in string")
    );
    workers.shutdown(SOON).await;
}
