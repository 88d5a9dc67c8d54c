//! Every failed attempt on record, as Node BullMQ keeps it: a job waiting for its next
//! attempt carries the last failure's `failedReason` and, in `stacktrace`, one entry
//! per failed attempt (its reason, then its error chain or where it panicked), bounded.
//! The operators' status route shows them with the time the next attempt runs.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use queue_axum::{JobRoutes, QueueLayer};
use queue_core::{Backoff, Job, JobError, JobInfo, JobOptions, JobState, Processor, Queue};
use queue_tests::http::{get, listener};
use queue_tests::{wait_for_state, wait_until, TestRedis, SOON};

/// An error with a cause, as a mailer's would be.
#[derive(Debug)]
struct SendFailed {
    attempt: u32,
    cause: std::io::Error,
}

impl std::fmt::Display for SendFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sending the welcome mail (attempt {})", self.attempt)
    }
}

impl std::error::Error for SendFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.cause)
    }
}

/// Fails as its payload says: `chain` always, with a cause; `once` on its first attempt
/// only, with a bare message; `panic` by panicking.
async fn flaky(job: Job<String>) -> Result<(), JobError> {
    match job.data.as_str() {
        "chain" => Err(JobError::retry(SendFailed {
            attempt: job.attempt(),
            cause: std::io::Error::other("connection refused"),
        })),
        "once" if job.attempt() == 1 => Err("the first try fails".into()),
        "panic" => panic!("boom in attempt {}", job.attempt()),
        _ => Ok(()),
    }
}

async fn app(redis: &TestRedis) -> queue_core::QueueApp {
    redis
        .app(|b| b.processor(Processor::new("fa-mail").any_job(flaky)))
        .await
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The job's `stacktrace` field read as another BullMQ client would: a JSON array.
fn raw_stacktrace(redis: &TestRedis, id: &str) -> Vec<String> {
    let raw = redis
        .job_field("fa-mail", id, "stacktrace")
        .unwrap_or_else(|| panic!("job {id} has no stacktrace field"));
    serde_json::from_str(&raw).unwrap_or_else(|e| panic!("stacktrace {raw:?} is no array: {e}"))
}

async fn job_in(queue: &Queue<String>, id: &str, state: JobState, entries: usize) -> JobInfo {
    wait_until(
        SOON,
        &format!("{id} {state} with {entries} recorded failures"),
        || async {
            match queue.get_job(id).await.expect("read") {
                Some(info) if info.state == Some(state) && info.stacktrace.len() == entries => {
                    Some(info)
                }
                _ => None,
            }
        },
    )
    .await
}

#[tokio::test]
async fn a_job_waiting_to_retry_says_why_each_attempt_failed_and_when_it_runs_next() {
    let redis = TestRedis::new("fa-retry");
    let app = app(&redis).await;
    let queue = app.queue::<String>("fa-mail").unwrap();
    let backoff = Duration::from_millis(1500);
    let workers = app.start_workers().await.unwrap();
    let added_at = now_ms();
    queue
        .add(
            "welcome",
            "chain".into(),
            JobOptions::new()
                .job_id("fa-1")
                .attempts(3)
                .backoff(Backoff::fixed(backoff)),
        )
        .await
        .unwrap();

    let waiting = job_in(&queue, "fa-1", JobState::Delayed, 1).await;
    let reason = "sending the welcome mail (attempt 1): connection refused";
    // In the hash, where Node BullMQ and Bull Board read them.
    assert_eq!(
        redis
            .job_field("fa-mail", "fa-1", "failedReason")
            .as_deref(),
        Some(reason)
    );
    let recorded = raw_stacktrace(&redis, "fa-1");
    assert_eq!(
        recorded,
        [format!("{reason}\nCaused by:\n    0: connection refused")]
    );
    assert_eq!(waiting.stacktrace, recorded);
    let runs_at = waiting
        .runs_at_ms
        .expect("a delayed retry says when it runs");
    let backoff_ms = backoff.as_millis() as u64;
    assert!(
        runs_at >= added_at + backoff_ms && runs_at <= now_ms() + backoff_ms,
        "runs at {runs_at}, added at {added_at}, backoff {backoff_ms} ms"
    );

    // The operators' route shows the attempts and the next run; the public one only when.
    let router = Router::new()
        .merge(JobRoutes::new().router())
        .nest(
            "/admin",
            JobRoutes::new().include_failed_reason(true).router(),
        )
        .layer(QueueLayer::new(&app));
    let (tcp, addr) = listener().await;
    tokio::spawn(async move { axum::serve(tcp, router).await });
    let admin = get(addr, "/admin/jobs/fa-mail/fa-1").await.json();
    assert_eq!(admin["state"], "delayed", "{admin}");
    assert_eq!(admin["failedReason"], reason);
    assert_eq!(admin["attemptErrors"], serde_json::json!(recorded));
    assert_eq!(admin["runsAt"], runs_at);
    let public = get(addr, "/jobs/fa-mail/fa-1").await.json();
    assert_eq!(public["runsAt"], runs_at, "{public}");
    assert!(public.get("attemptErrors").is_none(), "{public}");
    assert!(public.get("failedReason").is_none(), "{public}");

    // Each later attempt adds its own entry after the earlier ones.
    let failed = job_in(&queue, "fa-1", JobState::Failed, 3).await;
    let firsts: Vec<&str> = failed
        .stacktrace
        .iter()
        .map(|entry| entry.lines().next().unwrap_or_default())
        .collect();
    assert_eq!(
        firsts,
        (1..=3)
            .map(|n| format!("sending the welcome mail (attempt {n}): connection refused"))
            .collect::<Vec<_>>()
    );
    assert_eq!(failed.runs_at_ms, None);
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn a_retry_without_backoff_records_its_failure_and_keeps_it_after_success() {
    let redis = TestRedis::new("fa-once");
    let app = app(&redis).await;
    let queue = app.queue::<String>("fa-mail").unwrap();
    let workers = app.start_workers().await.unwrap();
    queue
        .add(
            "welcome",
            "once".into(),
            JobOptions::new().job_id("fa-2").attempts(2),
        )
        .await
        .unwrap();
    wait_for_state(&queue, "fa-2", JobState::Completed, SOON).await;
    // As Node keeps them: the record of the failed attempt stays on the completed job.
    assert_eq!(raw_stacktrace(&redis, "fa-2"), ["the first try fails"]);
    assert_eq!(
        redis
            .job_field("fa-mail", "fa-2", "failedReason")
            .as_deref(),
        Some("the first try fails")
    );
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn a_panic_is_recorded_with_where_it_happened() {
    let redis = TestRedis::new("fa-panic");
    let app = app(&redis).await;
    let queue = app.queue::<String>("fa-mail").unwrap();
    let workers = app.start_workers().await.unwrap();
    queue
        .add("welcome", "panic".into(), JobOptions::new().job_id("fa-3"))
        .await
        .unwrap();
    let failed = job_in(&queue, "fa-3", JobState::Failed, 1).await;
    assert_eq!(
        failed.failed_reason.as_deref(),
        Some("handler panicked: boom in attempt 1")
    );
    let entry = &failed.stacktrace[0];
    assert!(
        entry.starts_with(&format!("handler panicked at {}:", file!())),
        "{entry}"
    );
    assert!(entry.ends_with(":\nboom in attempt 1"), "{entry}");
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn a_long_error_chain_is_cut_and_the_entries_are_bounded() {
    let redis = TestRedis::new("fa-bound");
    let app = redis
        .app(|b| {
            b.processor(Processor::new("fa-mail").any_job(|_: Job<String>| async {
                let cause = std::io::Error::other("x".repeat(100_000));
                Err::<(), _>(JobError::retry(SendFailed { attempt: 0, cause }))
            }))
        })
        .await;
    let queue = app.queue::<String>("fa-mail").unwrap();
    let workers = app.start_workers().await.unwrap();
    queue
        .add(
            "welcome",
            "long".into(),
            JobOptions::new().job_id("fa-4").attempts(12),
        )
        .await
        .unwrap();
    let failed = job_in(&queue, "fa-4", JobState::Failed, 10).await;
    // Twelve failures, the last ten kept; each cut at 8 KiB.
    assert_eq!(failed.attempts_made, 12);
    for entry in &failed.stacktrace {
        assert!(entry.len() < 8 * 1024 + 64, "{} bytes", entry.len());
        assert!(entry.ends_with("... (cut at 8 KiB)"));
    }
    // The job's own limit, as Node's `stackTraceLimit`.
    let limited = JobOptions::new()
        .job_id("fa-5")
        .attempts(4)
        .stack_trace_limit(2);
    queue.add("welcome", "long".into(), limited).await.unwrap();
    let failed = job_in(&queue, "fa-5", JobState::Failed, 2).await;
    assert_eq!(failed.attempts_made, 4);
    workers.shutdown(SOON).await;
}
