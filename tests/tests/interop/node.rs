//! Interop with the real Node `bullmq`, 5.x and 6.x (both pinned in tests/node): a Node
//! service and ours share queues in both directions, with options (attempts, backoff,
//! delay, priority, job id, deduplication), return values, failures, events and counts.
//! Each scenario runs once per Node major; the flows, job schedulers, pause and
//! progress are in `interop/node_features.rs`.

use std::sync::Mutex;
use std::time::Duration;

use queue_core::{
    options::Deduplication, Backoff, Job, JobError, JobOptions, JobState, Processor, QueueEvent,
};
use queue_tests::node::Bullmq;
use queue_tests::{wait_for_state, wait_until, TestRedis, SOON};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodePayload {
    n: u32,
    #[serde(default)]
    fail_first: bool,
    #[serde(default)]
    fail_always: bool,
}

/// `(prefix, job id)` of every job our handler completed.
static COMPLETED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

async fn from_node(job: Job<NodePayload>) -> Result<u32, JobError> {
    if job.data.fail_always {
        return Err(JobError::unrecoverable("rust says: this job always fails"));
    }
    if job.data.fail_first && job.attempts_made() == 0 {
        return Err(JobError::retry(std::io::Error::other(
            "rust says: first attempt fails",
        )));
    }
    let prefix = job.queue().to_owned();
    COMPLETED
        .lock()
        .unwrap()
        .push((prefix, job.id().to_owned()));
    Ok(job.data.n * 10)
}

#[tokio::test]
async fn the_peer_runs_the_pinned_node_versions() {
    let v5 = Bullmq::V5.versions().await;
    assert_eq!(v5["bullmq"], "5.81.5");
    assert_eq!(v5["bullmqOtel"], "1.3.1");
    let v6 = Bullmq::V6.versions().await;
    assert_eq!(v6["bullmq"], "6.7.6");
    assert_eq!(v6["bullmqOtel"], "2.0.1");
}

#[tokio::test]
async fn jobs_added_by_node_run_on_our_worker_with_their_options() {
    node_jobs_run_here(Bullmq::V5).await;
}

#[tokio::test]
async fn jobs_added_by_node6_run_on_our_worker_with_their_options() {
    node_jobs_run_here(Bullmq::V6).await;
}

async fn node_jobs_run_here(bullmq: Bullmq) {
    let queue = format!("interop-in-{}", bullmq.major());
    let redis = TestRedis::new(&queue);
    let jobs = serde_json::json!([
        {"name": "plain", "data": {"n": 1}, "opts": {"jobId": "node-plain-1", "removeOnComplete": true}},
        {"name": "flaky", "data": {"n": 2, "failFirst": true},
         "opts": {"jobId": "node-flaky-1", "attempts": 3, "backoff": {"type": "exponential", "delay": 100}}},
        {"name": "later", "data": {"n": 3}, "opts": {"jobId": "node-later-1", "delay": 400}},
        {"name": "urgent", "data": {"n": 4}, "opts": {"jobId": "node-urgent-1", "priority": 1}},
        {"name": "auto", "data": {"n": 5}},
        {"name": "doomed", "data": {"n": 6, "failAlways": true}, "opts": {"jobId": "node-doomed-1", "attempts": 2}},
        // Node's deduplication: the second add is the first job.
        {"name": "once", "data": {"n": 7}, "opts": {"deduplication": {"id": "node-dedup"}, "delay": 300}},
        {"name": "once", "data": {"n": 8}, "opts": {"deduplication": {"id": "node-dedup"}}}
    ]);
    let added = bullmq
        .run(redis.prefix(), &["produce", &queue, &jobs.to_string()])
        .await;
    let auto_id = added[4]["added"].as_str().unwrap().to_owned();
    assert!(
        auto_id.parse::<u64>().is_ok(),
        "Node gives integer ids: {auto_id}"
    );
    let deduplicated = added[6]["added"].as_str().unwrap().to_owned();
    assert_eq!(added[7]["added"], deduplicated.as_str(), "{added:?}");

    let app = redis
        .app(|b| b.processor(Processor::new(&queue).concurrency(2).any_job(from_node)))
        .await;
    let q = app.queue::<NodePayload>(&queue).unwrap();
    assert_eq!(
        q.get_job("node-urgent-1").await.unwrap().unwrap().priority,
        1
    );
    // Node's deduplication id holds against our adds too.
    let ours = q
        .add(
            "once",
            NodePayload {
                n: 9,
                fail_first: false,
                fail_always: false,
            },
            JobOptions::new().deduplication(Deduplication::new("node-dedup")),
        )
        .await
        .unwrap();
    assert!(ours.duplicate, "{ours:?}");
    assert_eq!(ours.id, deduplicated);
    let workers = app.start_workers().await.unwrap();

    for id in [
        "node-flaky-1",
        "node-later-1",
        "node-urgent-1",
        auto_id.as_str(),
        deduplicated.as_str(),
    ] {
        wait_for_state(&q, id, JobState::Completed, SOON).await;
    }
    wait_for_state(&q, "node-doomed-1", JobState::Failed, SOON).await;
    let prefix = redis.prefix().to_owned();
    wait_until(SOON, "node-plain-1 done and removed", || async {
        let ran = COMPLETED
            .lock()
            .unwrap()
            .contains(&(queue.clone(), "node-plain-1".to_owned()));
        (ran && q.get_job("node-plain-1").await.unwrap().is_none()).then_some(())
    })
    .await;
    let flaky = q.get_job("node-flaky-1").await.unwrap().unwrap();
    assert_eq!((flaky.attempts_made, flaky.max_attempts), (2, 3));
    assert_eq!(flaky.return_value, Some(serde_json::json!(20)));
    let later = q.get_job("node-later-1").await.unwrap().unwrap();
    assert!(later.processed_on_ms.unwrap() - later.timestamp_ms >= 400);
    let once = q.get_job(&deduplicated).await.unwrap().unwrap();
    assert_eq!(
        once.return_value,
        Some(serde_json::json!(70)),
        "the first add's data"
    );
    workers.shutdown(SOON).await;

    // Both sides count the same, and Node reads our results and failures.
    let ours = q.get_job_counts().await.unwrap();
    let theirs = &bullmq.run(&prefix, &["counts", &queue]).await[0];
    assert_eq!(theirs["completed"], ours.completed);
    assert_eq!(theirs["failed"], ours.failed);
    assert_eq!(theirs["waiting"], ours.waiting);
    assert_eq!(
        (ours.completed, ours.failed),
        (5, 1),
        "the removeOnComplete job is gone on both sides"
    );
    let read = |id: &str| {
        let (prefix, queue, id) = (prefix.clone(), queue.clone(), id.to_owned());
        async move { bullmq.run(&prefix, &["job", &queue, &id]).await.remove(0)["job"].clone() }
    };
    let flaky = read("node-flaky-1").await;
    assert_eq!(flaky["returnvalue"], 20);
    assert_eq!(flaky["attemptsMade"], 2);
    assert_eq!(flaky["state"], "completed");
    let doomed = read("node-doomed-1").await;
    assert_eq!(doomed["state"], "failed");
    assert_eq!(doomed["failedReason"], "rust says: this job always fails");
    assert_eq!(
        doomed["attemptsMade"], 1,
        "unrecoverable: no second attempt"
    );
}

#[tokio::test]
async fn jobs_we_add_run_on_a_node_worker_which_reads_data_options_and_returns_values() {
    our_jobs_run_on_node(Bullmq::V5).await;
}

#[tokio::test]
async fn jobs_we_add_run_on_a_node6_worker_which_reads_data_options_and_returns_values() {
    our_jobs_run_on_node(Bullmq::V6).await;
}

async fn our_jobs_run_on_node(bullmq: Bullmq) {
    let queue = format!("interop-out-{}", bullmq.major());
    let redis = TestRedis::new(&queue);
    let app = redis.app(|b| b).await;
    let q = app.queue::<serde_json::Value>(&queue).unwrap();
    let retries = JobOptions::new()
        .attempts(3)
        .backoff(Backoff::exponential(Duration::from_millis(200)));
    q.add(
        "welcome",
        serde_json::json!({"to": "ada", "n": 1}),
        retries.clone().job_id("rust-1").priority(5),
    )
    .await
    .unwrap();
    q.add(
        "welcome",
        serde_json::json!({"failFirst": true}),
        retries.clone().job_id("rust-2"),
    )
    .await
    .unwrap();
    q.add(
        "welcome",
        serde_json::json!({"failAlways": true}),
        JobOptions::new().attempts(2).job_id("rust-3"),
    )
    .await
    .unwrap();
    let dedup = || JobOptions::new().deduplication(Deduplication::new("rust-dedup"));
    let first = q
        .add(
            "digest",
            serde_json::json!({"n": 4}),
            dedup().delay(Duration::from_millis(300)),
        )
        .await
        .unwrap();
    // Node's add with our deduplication id is our job.
    let jobs = serde_json::json!([{"name": "digest", "data": {"n": 5}, "opts": {"deduplication": {"id": "rust-dedup"}}}]);
    let theirs = bullmq
        .run(redis.prefix(), &["produce", &queue, &jobs.to_string()])
        .await;
    assert_eq!(theirs[0]["added"], first.id.as_str());

    let seen = bullmq.run(redis.prefix(), &["work", &queue, "4"]).await;
    let one = seen
        .iter()
        .find(|l| l["id"] == "rust-1")
        .expect("node ran rust-1");
    assert_eq!(one["name"], "welcome");
    assert_eq!(one["data"], serde_json::json!({"to": "ada", "n": 1}));
    assert_eq!(one["opts"]["attempts"], 3);
    assert_eq!(one["opts"]["priority"], 5);
    assert_eq!(
        one["opts"]["backoff"],
        serde_json::json!({"type": "exponential", "delay": 200})
    );
    assert_eq!(
        seen.iter().filter(|l| l["id"] == "rust-2").count(),
        2,
        "retried by node with our backoff"
    );
    assert_eq!(
        seen.iter().filter(|l| l["id"] == "rust-3").count(),
        2,
        "failed twice on node: {seen:?}"
    );
    let digest = seen
        .iter()
        .find(|l| l["id"] == first.id.as_str())
        .expect("node ran the deduplicated job");
    assert_eq!(digest["data"], serde_json::json!({"n": 4}));
    assert_eq!(digest["opts"]["deduplication"]["id"], "rust-dedup");

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
    let failed = q.get_job("rust-3").await.unwrap().unwrap();
    assert_eq!(
        q.get_job_state("rust-3").await.unwrap(),
        Some(JobState::Failed)
    );
    assert_eq!(
        failed.failed_reason.as_deref(),
        Some("node says: this job always fails")
    );
    assert_eq!((failed.attempts_made, failed.max_attempts), (2, 2));
    assert_eq!(
        failed.stacktrace.len(),
        2,
        "Node records a stack per failure"
    );
}

async fn quick(job: Job<serde_json::Value>) -> Result<String, JobError> {
    Ok(format!("rust did {}", job.id()))
}

#[tokio::test]
async fn each_side_sees_the_others_events() {
    events_both_ways(Bullmq::V5).await;
}

#[tokio::test]
async fn each_side_sees_the_others_events_node6() {
    events_both_ways(Bullmq::V6).await;
}

async fn events_both_ways(bullmq: Bullmq) {
    let redis = TestRedis::new(&format!("interop-events-{}", bullmq.major()));

    // Node listens to a queue we work on.
    let listener = bullmq.spawn(redis.prefix(), &["events", "interop-ev-a", "1"]);
    let app = redis
        .app(|b| b.processor(Processor::new("interop-ev-a").any_job(quick)))
        .await;
    let workers = app.start_workers().await.unwrap();
    let ours = app.queue::<serde_json::Value>("interop-ev-a").unwrap();
    ours.add("x", serde_json::json!({}), JobOptions::new().job_id("ev-1"))
        .await
        .unwrap();
    let heard = queue_tests::node::output(listener, SOON).await;
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
    bullmq
        .run(
            redis.prefix(),
            &["produce", "interop-ev-b", &jobs.to_string()],
        )
        .await;
    bullmq
        .run(redis.prefix(), &["work", "interop-ev-b", "1"])
        .await;
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
