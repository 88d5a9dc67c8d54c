//! Running jobs: dispatch by name, dependencies, return values, progress and logs, and
//! every way an attempt can fail without stopping the worker.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use queue_core::{Dep, Job, JobError, JobOptions, JobState, Processor};
use queue_tests::{wait_for_completed, wait_for_state, TestRedis, SOON};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Greeting {
    to: String,
}

struct Greeter {
    salutation: &'static str,
    sent: AtomicUsize,
}

async fn greet(job: Job<Greeting>, greeter: Dep<Greeter>) -> Result<String, JobError> {
    greeter.sent.fetch_add(1, Ordering::SeqCst);
    job.update_progress(50).await?;
    job.log(format!("greeting {}", job.data.to)).await?;
    job.update_progress(serde_json::json!({"step": "done"}))
        .await?;
    Ok(format!("{}, {}", greeter.salutation, job.data.to))
}

fn greeter() -> Arc<Greeter> {
    Arc::new(Greeter {
        salutation: "Hello",
        sent: AtomicUsize::new(0),
    })
}

#[tokio::test]
async fn a_handler_gets_its_payload_and_dependency_and_its_result_is_stored() {
    let redis = TestRedis::new("process");
    let greeter = greeter();
    let app = redis
        .app(|b| {
            b.provide_arc(greeter.clone())
                .processor(Processor::new("greetings").job("greet", greet))
        })
        .await;
    let q = app.queue::<Greeting>("greetings").unwrap();
    let workers = app.start_workers().await.unwrap();
    q.add(
        "greet",
        Greeting { to: "Ada".into() },
        JobOptions::new().job_id("greet-ada"),
    )
    .await
    .unwrap();

    wait_for_state(&q, "greet-ada", JobState::Completed, SOON).await;
    let info = q.get_job("greet-ada").await.unwrap().unwrap();
    assert_eq!(info.return_value, Some(serde_json::json!("Hello, Ada")));
    assert_eq!(info.progress, serde_json::json!({"step": "done"}));
    assert_eq!(info.attempts_made, 1);
    let logs = q.get_job_logs("greet-ada", 0..10).await.unwrap();
    assert_eq!(logs.lines, ["greeting Ada"]);
    assert_eq!(greeter.sent.load(Ordering::SeqCst), 1);
    assert!(workers.shutdown(SOON).await.is_clean());
}

async fn explode(job: Job<u32>) -> Result<(), JobError> {
    if job.data == 1 {
        panic!("boom on {}", job.id());
    }
    Ok(())
}

async fn sleepy(job: Job<u64>) -> Result<(), JobError> {
    tokio::time::sleep(Duration::from_millis(job.data)).await;
    Ok(())
}

/// One queue, a job per failure kind, then a good job: each failure has its reason and
/// the worker keeps going. (Bad job data has its own suite, in `queue/bad_input.rs`.)
#[tokio::test]
async fn panics_and_timeouts_fail_cleanly_and_the_worker_goes_on() {
    let redis = TestRedis::new("failures");
    let app = redis
        .app(|b| {
            b.processor(
                Processor::new("work")
                    .timeout(Duration::from_millis(300))
                    .job("explode", explode)
                    .job("sleepy", sleepy),
            )
        })
        .await;
    let workers = app.start_workers().await.unwrap();
    let raw = app.queue::<serde_json::Value>("work").unwrap();

    raw.add(
        "explode",
        serde_json::json!(1),
        JobOptions::new().job_id("panic-1"),
    )
    .await
    .unwrap();
    raw.add(
        "sleepy",
        serde_json::json!(5_000),
        JobOptions::new().job_id("slow-1"),
    )
    .await
    .unwrap();
    raw.add(
        "sleepy",
        serde_json::json!(5_000),
        JobOptions::new()
            .job_id("slow-2")
            .timeout(Duration::from_millis(100)),
    )
    .await
    .unwrap();
    raw.add(
        "explode",
        serde_json::json!(2),
        JobOptions::new().job_id("fine-1"),
    )
    .await
    .unwrap();

    for id in ["panic-1", "slow-1", "slow-2"] {
        wait_for_state(&raw, id, JobState::Failed, SOON).await;
    }
    wait_for_state(&raw, "fine-1", JobState::Completed, SOON).await;

    let reason = |id: &'static str| {
        let raw = raw.clone();
        async move {
            raw.get_job(id)
                .await
                .unwrap()
                .unwrap()
                .failed_reason
                .unwrap()
        }
    };
    assert_eq!(reason("panic-1").await, "handler panicked: boom on panic-1");
    assert_eq!(reason("slow-1").await, "timed out after 300ms");
    assert_eq!(
        reason("slow-2").await,
        "timed out after 100ms",
        "the job's own timeout wins"
    );
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn concurrency_bounds_the_jobs_running_at_once() {
    static RUNNING: AtomicUsize = AtomicUsize::new(0);
    static PEAK: AtomicUsize = AtomicUsize::new(0);
    async fn tracked(_job: Job<()>) -> Result<(), JobError> {
        let now = RUNNING.fetch_add(1, Ordering::SeqCst) + 1;
        PEAK.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(150)).await;
        RUNNING.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }

    let redis = TestRedis::new("concurrency");
    let app = redis
        .app(|b| b.processor(Processor::new("c").concurrency(4).any_job(tracked)))
        .await;
    let q = app.queue::<()>("c").unwrap();
    for i in 0..12 {
        q.add("t", (), JobOptions::new().job_id(format!("t-{i}")))
            .await
            .unwrap();
    }
    let workers = app.start_workers().await.unwrap();
    wait_for_completed(&q, 12, SOON).await;
    assert_eq!(PEAK.load(Ordering::SeqCst), 4, "four at once, never more");
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn handlers_are_unit_testable_without_redis() {
    let job = Job::for_test(Greeting { to: "Grace".into() });
    let handle = job.test_handle();
    let out = greet(job, Dep::new(greeter())).await.unwrap();
    assert_eq!(out, "Hello, Grace");
    assert_eq!(handle.logs(), ["greeting Grace"]);
    assert_eq!(
        handle.progress(),
        [serde_json::json!(50), serde_json::json!({"step": "done"})]
    );
}

#[tokio::test]
async fn the_limiter_spreads_starts_over_time() {
    async fn quick(_job: Job<()>) -> Result<(), JobError> {
        Ok(())
    }
    let redis = TestRedis::new("limiter");
    let app = redis
        .app(|b| {
            b.processor(
                Processor::new("limited")
                    .concurrency(10)
                    .limiter(2, Duration::from_secs(1))
                    .any_job(quick),
            )
        })
        .await;
    let q = app.queue::<()>("limited").unwrap();
    for i in 0..6 {
        q.add("x", (), JobOptions::new().job_id(format!("l-{i}")))
            .await
            .unwrap();
    }
    let workers = app.start_workers().await.unwrap();
    wait_for_completed(&q, 6, SOON).await;
    let mut starts = Vec::new();
    for i in 0..6 {
        starts.push(
            q.get_job(&format!("l-{i}"))
                .await
                .unwrap()
                .unwrap()
                .processed_on_ms
                .unwrap(),
        );
    }
    starts.sort_unstable();
    // Two per second: the fifth and sixth start at least two windows after the first.
    assert!(starts[4] - starts[0] >= 1_900, "starts {starts:?}");
    workers.shutdown(SOON).await;
}
