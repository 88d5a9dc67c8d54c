//! Interop beyond single jobs, against the real Node `bullmq` 5.x and 6.x (pinned in
//! tests/node), both directions: flows (with the UUID ids Node gives nodes without a job
//! id), job schedulers, pause and resume, and per-job progress. Each scenario runs once
//! per Node major.

use std::time::Duration;

use queue_core::{
    options::Schedule, ChildResults, Job, JobError, JobOptions, JobState, OnChildFailure,
    Processor, QueueApp, QueueEvent,
};
use queue_tests::node::{self, Bullmq};
use queue_tests::{wait_for_state, wait_until, TestRedis, SOON};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Step {
    n: u32,
}

async fn double(job: Job<Step>) -> Result<u32, JobError> {
    Ok(job.data.n * 2)
}

/// A middle node: its own number plus what its children returned.
async fn subtotal(job: Job<Step>, children: ChildResults<u32>) -> Result<u32, JobError> {
    Ok(job.data.n + children.values().sum::<u32>())
}

/// The root: every child's id and value.
async fn collect(
    _job: Job<String>,
    children: ChildResults<u32>,
) -> Result<Vec<(String, u32)>, JobError> {
    Ok(children.iter().map(|(k, v)| (k.id.clone(), *v)).collect())
}

/// A job that reports two progress values, then completes.
async fn reports(job: Job<serde_json::Value>) -> Result<&'static str, JobError> {
    job.update_progress(25).await?;
    job.update_progress(serde_json::json!({"step": "b"}))
        .await?;
    Ok("reported")
}

async fn echo(job: Job<serde_json::Value>) -> Result<serde_json::Value, JobError> {
    Ok(job.data)
}

async fn flow_app(redis: &TestRedis) -> QueueApp {
    redis
        .app(|b| {
            b.processor(
                Processor::new("steps")
                    .concurrency(4)
                    .job("double", double)
                    .job("subtotal", subtotal),
            )
            .processor(Processor::new("roots").job("collect", collect))
        })
        .await
}

fn is_uuid(id: &str) -> bool {
    uuid::Uuid::parse_str(id).is_ok()
}

#[tokio::test]
async fn node_flows_with_generated_ids_run_here_and_ours_run_in_node() {
    flows(Bullmq::V5).await;
}

#[tokio::test]
async fn node6_flows_with_generated_ids_run_here_and_ours_run_in_node6() {
    flows(Bullmq::V6).await;
}

async fn flows(bullmq: Bullmq) {
    let redis = TestRedis::new(&format!("ix-flow-{}", bullmq.major()));
    let app = flow_app(&redis).await;
    let roots = app.queue::<String>("roots").unwrap();
    let steps = app.queue::<Step>("steps").unwrap();

    // Three levels; only the root names its id, Node makes up the rest (UUIDs).
    let tree = serde_json::json!({
        "name": "collect", "queueName": "roots", "data": "from node",
        "opts": {"jobId": "node-root"},
        "children": [
            {"name": "double", "queueName": "steps", "data": {"n": 7}},
            {"name": "subtotal", "queueName": "steps", "data": {"n": 100},
             "children": [{"name": "double", "queueName": "steps", "data": {"n": 4}}]}
        ]
    })
    .to_string();
    let added = bullmq.run(redis.prefix(), &["flow", "-", &tree]).await;
    let flow = &added[0]["flow"];
    assert_eq!(flow["id"], "node-root");
    let child_ids: Vec<String> = flow["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    let grandchild = flow["children"][1]["children"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        child_ids.iter().chain([&grandchild]).all(|id| is_uuid(id)),
        "Node's generated ids are UUIDs: {flow}"
    );
    // We read Node's ids as they are.
    let middle = steps.get_job(&child_ids[1]).await.unwrap().unwrap();
    assert_eq!(middle.parent.as_ref().unwrap().id, "node-root");

    let workers = app.start_workers().await.unwrap();
    wait_for_state(&roots, "node-root", JobState::Completed, SOON).await;
    let mut seen: Vec<(String, u32)> = serde_json::from_value(
        roots
            .get_job("node-root")
            .await
            .unwrap()
            .unwrap()
            .return_value
            .unwrap(),
    )
    .unwrap();
    seen.sort();
    let mut expected = vec![(child_ids[0].clone(), 14), (child_ids[1].clone(), 108)];
    expected.sort();
    assert_eq!(seen, expected);
    workers.shutdown(SOON).await;
    // Node reads what our parent returned.
    let root = &bullmq
        .run(redis.prefix(), &["job", "roots", "node-root"])
        .await[0]["job"];
    assert_eq!(root["state"], "completed");
    assert_eq!(root["returnvalue"].as_array().unwrap().len(), 2);

    // Ours, with ids we chose, on Node's worker: children first, then the parent.
    let theirs = app.queue::<serde_json::Value>("nodeflow").unwrap();
    let flow = theirs
        .flow_job("parent", serde_json::json!({"of": "rust"}))
        .options(JobOptions::new().job_id("rust-root"))
        .child(
            OnChildFailure::FailParent,
            theirs
                .flow_job("child", serde_json::json!({"k": 1}))
                .options(JobOptions::new().job_id("rust-a")),
        );
    app.add_flow(flow).await.unwrap();
    let lines = bullmq.run(redis.prefix(), &["work", "nodeflow", "2"]).await;
    assert_eq!(lines.last().unwrap()["id"], "rust-root", "{lines:?}");
    let values = &lines.last().unwrap()["childrenValues"];
    assert_eq!(
        values[format!("{}:nodeflow:rust-a", redis.prefix())]["echo"],
        serde_json::json!({"k": 1})
    );
    wait_for_state(&theirs, "rust-root", JobState::Completed, SOON).await;
}

#[tokio::test]
async fn job_schedulers_cross_over() {
    schedulers(Bullmq::V5).await;
}

#[tokio::test]
async fn job_schedulers_cross_over_node6() {
    schedulers(Bullmq::V6).await;
}

async fn schedulers(bullmq: Bullmq) {
    let redis = TestRedis::new(&format!("ix-sched-{}", bullmq.major()));
    let app = redis
        .app(|b| b.processor(Processor::new("from-node").any_job(echo)))
        .await;

    // Node's scheduler; our worker runs what it adds, and we read it as Node wrote it.
    let scheduler = serde_json::json!({
        "id": "node-tick", "repeat": {"every": 300},
        "name": "tick", "data": {"from": "node"}, "opts": {"attempts": 2}
    });
    bullmq
        .run(
            redis.prefix(),
            &["upsert-scheduler", "from-node", &scheduler.to_string()],
        )
        .await;
    let q = app.queue::<serde_json::Value>("from-node").unwrap();
    let read = q.get_schedulers(0..10).await.unwrap();
    assert_eq!(read.len(), 1, "{read:?}");
    assert_eq!(read[0].id, "node-tick");
    assert_eq!(read[0].job_name, "tick");
    assert_eq!(read[0].every, Some(Duration::from_millis(300)));
    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "two scheduled jobs run here", || async {
        (q.get_job_counts().await.unwrap().completed >= 2).then_some(())
    })
    .await;
    let done = q.get_jobs(&[JobState::Completed], 0..10).await.unwrap();
    for job in &done {
        assert!(job.id.starts_with("repeat:node-tick:"), "{}", job.id);
        assert_eq!(job.return_value, Some(serde_json::json!({"from": "node"})));
        assert_eq!(job.max_attempts, 2, "the template's options");
    }
    workers.shutdown(SOON).await;
    let removed = bullmq
        .run(
            redis.prefix(),
            &["remove-scheduler", "from-node", "node-tick"],
        )
        .await;
    assert_eq!(removed[0]["removed"], true);
    assert_eq!(q.scheduler_count().await.unwrap(), 0);

    // Ours; Node's worker runs what it adds, and Node reads it.
    let ours = app.queue::<serde_json::Value>("from-rust").unwrap();
    ours.upsert_scheduler(
        "rust-tick",
        Schedule::every(Duration::from_millis(300)),
        "tock",
        serde_json::json!({"from": "rust"}),
        JobOptions::new().attempts(3),
    )
    .await
    .unwrap();
    let listed = bullmq
        .run(redis.prefix(), &["schedulers", "from-rust"])
        .await;
    let theirs = &listed[0]["scheduler"];
    assert_eq!(theirs["key"], "rust-tick", "{listed:?}");
    assert_eq!(theirs["name"], "tock");
    assert_eq!(theirs["every"], 300);
    let ran = bullmq
        .run(redis.prefix(), &["work", "from-rust", "2"])
        .await;
    assert_eq!(ran.len(), 2, "{ran:?}");
    for job in &ran {
        assert!(job["id"].as_str().unwrap().starts_with("repeat:rust-tick:"));
        assert_eq!(job["name"], "tock");
        assert_eq!(job["data"], serde_json::json!({"from": "rust"}));
        assert_eq!(job["opts"]["attempts"], 3);
    }
    assert!(ours.remove_scheduler("rust-tick").await.unwrap());
}

#[tokio::test]
async fn a_pause_on_either_side_holds_the_other_sides_workers() {
    pause(Bullmq::V5).await;
}

#[tokio::test]
async fn a_pause_on_either_side_holds_the_other_sides_workers_node6() {
    pause(Bullmq::V6).await;
}

async fn pause(bullmq: Bullmq) {
    let redis = TestRedis::new(&format!("ix-pause-{}", bullmq.major()));
    let app = redis
        .app(|b| {
            b.processor(Processor::new("held").any_job(echo))
                .processor(Processor::new("control").any_job(echo))
        })
        .await;
    let held = app.queue::<serde_json::Value>("held").unwrap();
    let control = app.queue::<serde_json::Value>("control").unwrap();

    // Node pauses; we read it, and our worker takes nothing from the queue.
    bullmq.run(redis.prefix(), &["pause", "held"]).await;
    assert!(held.is_paused().await.unwrap());
    held.add(
        "h",
        serde_json::json!(1),
        JobOptions::new().job_id("held-1"),
    )
    .await
    .unwrap();
    let workers = app.start_workers().await.unwrap();
    // The same app's worker of an unpaused queue runs a job meanwhile: the workers are
    // up and fetching.
    control
        .add(
            "c",
            serde_json::json!(2),
            JobOptions::new().job_id("control-1"),
        )
        .await
        .unwrap();
    wait_for_state(&control, "control-1", JobState::Completed, SOON).await;
    let waiting = held.get_job("held-1").await.unwrap().unwrap();
    assert_eq!(waiting.processed_on_ms, None, "a paused queue's job ran");
    // Node resumes; our worker wakes up for the job.
    bullmq.run(redis.prefix(), &["resume", "held"]).await;
    assert!(!held.is_paused().await.unwrap());
    wait_for_state(&held, "held-1", JobState::Completed, SOON).await;
    workers.shutdown(SOON).await;

    // We pause; Node reads it, and Node's worker takes nothing until we resume.
    let theirs = app.queue::<serde_json::Value>("node-held").unwrap();
    theirs.pause().await.unwrap();
    let read = bullmq.run(redis.prefix(), &["paused", "node-held"]).await;
    assert_eq!(read[0]["paused"], true);
    theirs
        .add(
            "n",
            serde_json::json!({"n": 1}),
            JobOptions::new().job_id("node-held-1"),
        )
        .await
        .unwrap();
    let worker = bullmq.spawn(redis.prefix(), &["work", "node-held", "1"]);
    // Node's worker is up once it has registered its connection (BullMQ names it after
    // the queue); the job is still waiting then.
    wait_until(SOON, "Node's worker connected", || async {
        (theirs.get_workers().await.unwrap().len() == 1).then_some(())
    })
    .await;
    let job = &bullmq
        .run(redis.prefix(), &["job", "node-held", "node-held-1"])
        .await[0]["job"];
    assert_eq!(job["processedOn"], serde_json::Value::Null, "{job}");
    theirs.resume().await.unwrap();
    let lines = node::output(worker, SOON).await;
    assert_eq!(lines[0]["id"], "node-held-1");
    wait_for_state(&theirs, "node-held-1", JobState::Completed, SOON).await;
}

#[tokio::test]
async fn progress_reported_on_either_side_is_read_on_the_other() {
    progress(Bullmq::V5).await;
}

#[tokio::test]
async fn progress_reported_on_either_side_is_read_on_the_other_node6() {
    progress(Bullmq::V6).await;
}

async fn progress(bullmq: Bullmq) {
    let redis = TestRedis::new(&format!("ix-progress-{}", bullmq.major()));

    // Our handler reports; Node's QueueEvents hears each value, and Node reads the last.
    let listener = bullmq.spawn(redis.prefix(), &["events", "rust-reports", "1"]);
    let app = redis
        .app(|b| b.processor(Processor::new("rust-reports").any_job(reports)))
        .await;
    let q = app.queue::<serde_json::Value>("rust-reports").unwrap();
    let workers = app.start_workers().await.unwrap();
    q.add("r", serde_json::json!({}), JobOptions::new().job_id("rp-1"))
        .await
        .unwrap();
    let heard = node::output(listener, SOON).await;
    let reported: Vec<&serde_json::Value> = heard
        .iter()
        .filter(|e| e["event"] == "progress" && e["jobId"] == "rp-1")
        .map(|e| &e["data"])
        .collect();
    assert_eq!(
        reported,
        [&serde_json::json!(25), &serde_json::json!({"step": "b"})],
        "{heard:?}"
    );
    workers.shutdown(SOON).await;
    let job = &bullmq
        .run(redis.prefix(), &["job", "rust-reports", "rp-1"])
        .await[0]["job"];
    assert_eq!(job["progress"], serde_json::json!({"step": "b"}));

    // Node's handler reports; our QueueEvents hears each value, and we read the last.
    let events = app.queue_events("node-reports").await.unwrap();
    let jobs = serde_json::json!([
        {"name": "n", "data": {"progress": [50, {"stage": "x"}]}, "opts": {"jobId": "np-1"}}
    ]);
    bullmq
        .run(
            redis.prefix(),
            &["produce", "node-reports", &jobs.to_string()],
        )
        .await;
    bullmq
        .run(redis.prefix(), &["work", "node-reports", "1"])
        .await;
    let mut values = Vec::new();
    while values.len() < 2 {
        match events
            .wait_for(SOON, |e| matches!(e, QueueEvent::Progress { .. }))
            .await
            .unwrap()
        {
            QueueEvent::Progress { job_id, data } if job_id == "np-1" => values.push(data),
            _ => {}
        }
    }
    assert_eq!(
        values,
        [serde_json::json!(50), serde_json::json!({"stage": "x"})]
    );
    events.close().await;
    let theirs = app.queue::<serde_json::Value>("node-reports").unwrap();
    let job = theirs.get_job("np-1").await.unwrap().unwrap();
    assert_eq!(job.progress, serde_json::json!({"stage": "x"}));
}
