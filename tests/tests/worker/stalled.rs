//! A worker process killed with SIGKILL in the middle of a job: its lock expires, another
//! worker finds the job stalled, runs it again, and nothing stays active; the rescuer's
//! metrics count the stall.

use std::process::Stdio;
use std::time::Duration;

use queue_core::metrics::Metrics;
use queue_core::{Job, JobError, JobOptions, JobState, Processor, WorkerEvent};
use queue_tests::{wait_for_state, TestRedis, SOON};
use tokio::io::{AsyncBufReadExt, BufReader};

async fn finish(job: Job<serde_json::Value>) -> Result<String, JobError> {
    Ok(format!(
        "finished {} on attempt start {}",
        job.id(),
        job.attempt()
    ))
}

#[tokio::test]
async fn a_job_of_a_killed_worker_process_is_recovered_and_completed_elsewhere() {
    let redis = TestRedis::new("stalled");
    let producer = redis.app(|b| b).await;
    let q = producer.queue::<serde_json::Value>("stalled").unwrap();
    q.add(
        "work",
        serde_json::json!({}),
        JobOptions::new().job_id("stall-1"),
    )
    .await
    .unwrap();

    // The first worker is another process; it takes the job and never finishes it.
    let mut doomed = tokio::process::Command::new(env!("CARGO_BIN_EXE_stall-worker"))
        .arg("stalled")
        .env("PREFIX", redis.prefix())
        .env("REDIS_URL", queue_tests::redis_url())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the worker process starts");
    let mut lines = BufReader::new(doomed.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(SOON, lines.next_line())
        .await
        .expect("it starts the job");
    assert_eq!(first.unwrap().as_deref(), Some("started stall-1"));
    assert_eq!(
        q.get_job_state("stall-1").await.unwrap(),
        Some(JobState::Active)
    );

    doomed.kill().await.expect("SIGKILL");

    // A second worker, in this process, recovers it.
    let metrics = Metrics::new();
    let rescuer = redis
        .app(|b| {
            b.metrics(metrics.clone()).processor(
                Processor::new("stalled")
                    .lock_duration(Duration::from_secs(1))
                    .stalled_interval(Duration::from_millis(500))
                    .any_job(finish),
            )
        })
        .await;
    let mut events = rescuer.worker_events();
    let workers = rescuer.start_workers().await.unwrap();
    wait_for_state(&q, "stall-1", JobState::Completed, Duration::from_secs(20)).await;

    let stalled = tokio::time::timeout(SOON, async {
        loop {
            if let Some(WorkerEvent::Stalled { job_id, .. }) = events.recv().await {
                return job_id;
            }
        }
    })
    .await
    .expect("the stall was reported");
    assert_eq!(stalled, "stall-1");
    let info = q.get_job("stall-1").await.unwrap().unwrap();
    assert_eq!(
        info.attempts_started, 2,
        "started by the dead worker, then by the rescuer"
    );
    assert_eq!(q.get_job_counts().await.unwrap().active, 0);
    assert!(workers.shutdown(SOON).await.is_clean());

    // The stall is counted once, and the recovered run as done.
    let scraped = metrics.render(&rescuer).await.unwrap();
    let sample = |name: &str| {
        scraped
            .lines()
            .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(r#"queue="stalled""#))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {name} for queue `stalled` in:\n{scraped}"))
    };
    assert_eq!(sample("queue_jobs_stalled_total"), 1.0);
    assert_eq!(sample("queue_jobs_completed_total"), 1.0);
    // An `any_job` handler's names are not a bounded set: they are counted as `*`.
    assert!(
        scraped.contains(r#"queue_jobs_stalled_total{queue="stalled",name="*"} 1"#),
        "{scraped}"
    );
}
