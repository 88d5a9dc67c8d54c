//! Interop with the real Node `bullmq` (5.x, pinned in tests/node): a Node service and
//! ours share queues in both directions, with options, return values, events and counts.

use std::sync::Mutex;
use std::time::Duration;

use queue_core::{Backoff, Job, JobError, JobOptions, JobState, Processor, QueueEvent};
use queue_tests::{node, wait_for_state, wait_until, TestRedis, SOON};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodePayload {
    n: u32,
    #[serde(default)]
    fail_first: bool,
}

static COMPLETED: Mutex<Vec<String>> = Mutex::new(Vec::new());

async fn from_node(job: Job<NodePayload>) -> Result<u32, JobError> {
    if job.data.fail_first && job.attempts_made() == 0 {
        return Err(JobError::retry(std::io::Error::other(
            "rust says: first attempt fails",
        )));
    }
    COMPLETED.lock().unwrap().push(job.id().to_owned());
    Ok(job.data.n * 10)
}

#[tokio::test]
async fn jobs_added_by_node_run_on_our_worker_with_their_options() {
    let redis = TestRedis::new("interop-in");
    let jobs = serde_json::json!([
        {"name": "plain", "data": {"n": 1}, "opts": {"jobId": "node-plain-1", "removeOnComplete": true}},
        {"name": "flaky", "data": {"n": 2, "failFirst": true},
         "opts": {"jobId": "node-flaky-1", "attempts": 3, "backoff": {"type": "exponential", "delay": 100}}},
        {"name": "later", "data": {"n": 3}, "opts": {"jobId": "node-later-1", "delay": 400}},
        {"name": "urgent", "data": {"n": 4}, "opts": {"jobId": "node-urgent-1", "priority": 1}},
        {"name": "auto", "data": {"n": 5}}
    ]);
    let added = node::run(
        redis.prefix(),
        &["produce", "interop-in", &jobs.to_string()],
    )
    .await;
    let auto_id = added[4]["added"].as_str().unwrap().to_owned();
    assert!(
        auto_id.parse::<u64>().is_ok(),
        "Node gives integer ids: {auto_id}"
    );

    let app = redis
        .app(|b| {
            b.processor(
                Processor::new("interop-in")
                    .concurrency(2)
                    .any_job(from_node),
            )
        })
        .await;
    let q = app.queue::<NodePayload>("interop-in").unwrap();
    assert_eq!(
        q.get_job("node-urgent-1").await.unwrap().unwrap().priority,
        1
    );
    let workers = app.start_workers().await.unwrap();

    for id in [
        "node-flaky-1",
        "node-later-1",
        "node-urgent-1",
        auto_id.as_str(),
    ] {
        wait_for_state(&q, id, JobState::Completed, SOON).await;
    }
    wait_until(SOON, "node-plain-1 done and removed", || async {
        (COMPLETED
            .lock()
            .unwrap()
            .contains(&"node-plain-1".to_owned())
            && q.get_job("node-plain-1").await.unwrap().is_none())
        .then_some(())
    })
    .await;
    let flaky = q.get_job("node-flaky-1").await.unwrap().unwrap();
    assert_eq!((flaky.attempts_made, flaky.max_attempts), (2, 3));
    assert_eq!(flaky.return_value, Some(serde_json::json!(20)));
    let later = q.get_job("node-later-1").await.unwrap().unwrap();
    assert!(later.processed_on_ms.unwrap() - later.timestamp_ms >= 400);
    workers.shutdown(SOON).await;

    // Both sides count the same.
    let ours = q.get_job_counts().await.unwrap();
    let theirs = &node::run(redis.prefix(), &["counts", "interop-in"]).await[0];
    assert_eq!(theirs["completed"], ours.completed);
    assert_eq!(theirs["waiting"], ours.waiting);
    assert_eq!(
        ours.completed, 4,
        "the removeOnComplete job is gone on both sides"
    );
}

#[tokio::test]
async fn jobs_we_add_run_on_a_node_worker_which_reads_data_options_and_returns_values() {
    let redis = TestRedis::new("interop-out");
    let app = redis.app(|b| b).await;
    let q = app.queue::<serde_json::Value>("interop-out").unwrap();
    let retries = JobOptions::new()
        .attempts(3)
        .backoff(Backoff::exponential(Duration::from_millis(200)));
    q.add(
        "welcome",
        serde_json::json!({"to": "ada", "n": 1}),
        retries.clone().job_id("rust-1"),
    )
    .await
    .unwrap();
    q.add(
        "welcome",
        serde_json::json!({"failFirst": true}),
        retries.job_id("rust-2"),
    )
    .await
    .unwrap();

    let seen = node::run(redis.prefix(), &["work", "interop-out", "2"]).await;
    let first = seen
        .iter()
        .find(|l| l["id"] == "rust-1")
        .expect("node ran rust-1");
    assert_eq!(first["name"], "welcome");
    assert_eq!(first["data"], serde_json::json!({"to": "ada", "n": 1}));
    assert_eq!(first["opts"]["attempts"], 3);
    assert_eq!(
        first["opts"]["backoff"],
        serde_json::json!({"type": "exponential", "delay": 200})
    );
    assert_eq!(
        seen.iter().filter(|l| l["id"] == "rust-2").count(),
        2,
        "retried by node with our backoff"
    );

    let done = q.get_job("rust-1").await.unwrap().unwrap();
    assert_eq!(
        done.return_value,
        Some(serde_json::json!({"echo": {"to": "ada", "n": 1}, "by": "node"}))
    );
    assert_eq!(
        q.get_job_state("rust-2").await.unwrap(),
        Some(JobState::Completed)
    );
    assert_eq!(q.get_job("rust-2").await.unwrap().unwrap().attempts_made, 2);
}

async fn quick(job: Job<serde_json::Value>) -> Result<String, JobError> {
    Ok(format!("rust did {}", job.id()))
}

#[tokio::test]
async fn each_side_sees_the_others_events() {
    let redis = TestRedis::new("interop-events");

    // Node listens to a queue we work on.
    let listener = node::spawn(redis.prefix(), &["events", "interop-ev-a", "1"]);
    let app = redis
        .app(|b| b.processor(Processor::new("interop-ev-a").any_job(quick)))
        .await;
    let workers = app.start_workers().await.unwrap();
    let ours = app.queue::<serde_json::Value>("interop-ev-a").unwrap();
    ours.add("x", serde_json::json!({}), JobOptions::new().job_id("ev-1"))
        .await
        .unwrap();
    let heard = node::output(listener, SOON).await;
    assert!(
        heard
            .iter()
            .any(|e| e["event"] == "added" && e["jobId"] == "ev-1"),
        "{heard:?}"
    );
    let completed = heard
        .iter()
        .find(|e| e["event"] == "completed")
        .expect("node heard completed");
    assert_eq!(completed["jobId"], "ev-1");
    assert_eq!(completed["returnvalue"], "rust did ev-1");
    workers.shutdown(SOON).await;

    // We listen to a queue Node produces to and works on.
    let events = app.queue_events("interop-ev-b").await.unwrap();
    let jobs = serde_json::json!([{"name": "n", "data": {"n": 1}, "opts": {"jobId": "node-ev-1"}}]);
    node::run(
        redis.prefix(),
        &["produce", "interop-ev-b", &jobs.to_string()],
    )
    .await;
    node::run(redis.prefix(), &["work", "interop-ev-b", "1"]).await;
    let added = events
        .wait_for(
            SOON,
            |e| matches!(e, QueueEvent::Added { job_id, .. } if job_id == "node-ev-1"),
        )
        .await
        .unwrap();
    assert!(matches!(added, QueueEvent::Added { name, .. } if name == "n"));
    let done = events
        .wait_for(SOON, |e| matches!(e, QueueEvent::Completed { .. }))
        .await
        .unwrap();
    assert_eq!(
        done,
        QueueEvent::Completed {
            job_id: "node-ev-1".into(),
            return_value: serde_json::json!({"echo": {"n": 1}, "by": "node"})
        }
    );
    events.close().await;
}
