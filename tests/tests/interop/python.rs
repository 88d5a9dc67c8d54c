//! Interop with the real Python `bullmq` (3.x, pinned in tests/python/requirements.txt,
//! installed by scripts/test.sh into target/python-peer): a Python worker runs a job we
//! add, ours runs jobs Python adds, and each side reads the other's results and
//! failures.

use queue_core::{Job, JobError, JobOptions, JobState, Processor};
use queue_tests::{python, wait_for_state, TestRedis, SOON};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Greeting {
    to: String,
    #[serde(default)]
    fail_always: bool,
}

async fn greet(job: Job<Greeting>) -> Result<String, JobError> {
    if job.data.fail_always {
        return Err(JobError::unrecoverable("rust says: this job always fails"));
    }
    Ok(format!("hello {} from rust", job.data.to))
}

#[tokio::test]
async fn the_python_peer_runs_the_pinned_version() {
    let version = python::run("unused", &["version"]).await.remove(0);
    assert_eq!(version["bullmq"], "3.4.4");
}

#[tokio::test]
async fn jobs_python_adds_run_on_our_worker_and_python_reads_the_results() {
    let redis = TestRedis::new("py-in");
    // As a Python service adds them: its own defaults (it writes `attempts: 0`,
    // `backoff: null` into every job's options), an id it chose, one it did not.
    let jobs = serde_json::json!([
        {"name": "greet", "data": {"to": "ada"}, "opts": {"jobId": "py-1"}},
        {"name": "greet", "data": {"to": "grace"}},
        {"name": "greet", "data": {"to": "x", "failAlways": true}, "opts": {"jobId": "py-bad", "attempts": 3}}
    ]);
    let added = python::run(redis.prefix(), &["produce", "py-in", &jobs.to_string()]).await;
    assert_eq!(added[0]["added"], "py-1");
    let auto_id = added[1]["added"].as_str().unwrap().to_owned();

    let app = redis
        .app(|b| b.processor(Processor::new("py-in").any_job(greet)))
        .await;
    let q = app.queue::<Greeting>("py-in").unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&q, "py-1", JobState::Completed, SOON).await;
    wait_for_state(&q, &auto_id, JobState::Completed, SOON).await;
    wait_for_state(&q, "py-bad", JobState::Failed, SOON).await;
    workers.shutdown(SOON).await;
    assert_eq!(
        q.get_job("py-1").await.unwrap().unwrap().return_value,
        Some(serde_json::json!("hello ada from rust"))
    );

    // Python reads what our worker wrote.
    let read = |id: String| {
        let prefix = redis.prefix().to_owned();
        async move { python::run(&prefix, &["job", "py-in", &id]).await.remove(0)["job"].clone() }
    };
    let done = read(auto_id).await;
    assert_eq!(done["state"], "completed");
    assert_eq!(done["returnvalue"], "hello grace from rust");
    assert_eq!(done["attemptsMade"], 1);
    let bad = read("py-bad".to_owned()).await;
    assert_eq!(bad["state"], "failed");
    assert_eq!(bad["failedReason"], "rust says: this job always fails");
}

#[tokio::test]
async fn jobs_we_add_run_on_a_python_worker_and_we_read_the_results() {
    let redis = TestRedis::new("py-out");
    let app = redis.app(|b| b).await;
    let q = app.queue::<serde_json::Value>("py-out").unwrap();
    q.add(
        "welcome",
        serde_json::json!({"to": "ada", "n": 1}),
        JobOptions::new().job_id("rust-1").attempts(2),
    )
    .await
    .unwrap();
    q.add(
        "welcome",
        serde_json::json!({"failAlways": true}),
        JobOptions::new().job_id("rust-bad").attempts(2),
    )
    .await
    .unwrap();

    let seen = python::run(redis.prefix(), &["work", "py-out", "2"]).await;
    let first = seen
        .iter()
        .find(|l| l["id"] == "rust-1")
        .expect("python ran rust-1");
    assert_eq!(first["name"], "welcome");
    assert_eq!(first["data"], serde_json::json!({"to": "ada", "n": 1}));
    assert_eq!(first["opts"]["attempts"], 2);
    assert_eq!(
        seen.iter().filter(|l| l["id"] == "rust-bad").count(),
        2,
        "retried by python as our options say: {seen:?}"
    );

    let done = q.get_job("rust-1").await.unwrap().unwrap();
    assert_eq!(
        done.return_value,
        Some(serde_json::json!({"echo": {"to": "ada", "n": 1}, "by": "python"}))
    );
    assert_eq!(
        q.get_job_state("rust-bad").await.unwrap(),
        Some(JobState::Failed)
    );
    let bad = q.get_job("rust-bad").await.unwrap().unwrap();
    assert_eq!(
        bad.failed_reason.as_deref(),
        Some("python says: this job always fails")
    );
    assert_eq!((bad.attempts_made, bad.max_attempts), (2, 2));
}
