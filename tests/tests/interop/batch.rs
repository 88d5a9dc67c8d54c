//! Batch workers (#46) with the real Node `bullmq`, 5.x and 6.x: a Node service adds
//! jobs (priorities, delays, attempts, a payload our type refuses), our batch worker
//! runs them many to a call, and Node BullMQ, its `QueueEvents` and Bull Board read the
//! results as they read jobs a Node worker ran: each job of a batch is an ordinary
//! BullMQ job, with its own record, attempts and events.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queue_core::worker::{Batch, BatchResult};
use queue_core::{Dep, JobError, Processor};
use queue_tests::node::Bullmq;
use queue_tests::{wait_until, TestRedis, SOON};
use serde::Deserialize;

/// The payload our batch handler takes. Node sends it as
/// `{n, failFirst?, failAlways?, quiet?}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    n: u32,
    /// The handler fails this job's first attempt (retryable).
    #[serde(default)]
    fail_first: bool,
    /// The handler fails every attempt of this job (retryable).
    #[serde(default)]
    fail_always: bool,
    /// The handler gives this job no return value of its own.
    #[serde(default)]
    quiet: bool,
}

/// What the batch handler saw: each call's job ids, in the order given.
#[derive(Default)]
struct Calls(Mutex<Vec<Vec<String>>>);

impl Calls {
    fn all(&self) -> Vec<Vec<String>> {
        self.0.lock().unwrap().clone()
    }
}

/// The return value the handler sets for row `n` on its attempt `attempt`.
fn receipt(n: u32, attempt: u32) -> serde_json::Value {
    serde_json::json!({"square": n * n, "attempt": attempt, "by": "rust batch"})
}

/// Completes each row with its receipt (a quiet row with none), and fails the first
/// attempt of a `failFirst` row and every attempt of a `failAlways` one.
async fn rows(batch: Batch<Row>, calls: Dep<Calls>) -> Result<BatchResult, JobError> {
    let ids = batch.iter().map(|job| job.id().to_owned()).collect();
    calls.0.lock().unwrap().push(ids);
    let mut result = BatchResult::new();
    for job in &batch {
        let row = &job.data;
        if row.fail_always || (row.fail_first && job.attempt() == 1) {
            let reason = format!(
                "rust batch says: row {} failed attempt {}",
                row.n,
                job.attempt()
            );
            result.fail(job, JobError::retry(reason));
        } else if !row.quiet {
            result.complete(job, receipt(row.n, job.attempt()));
        }
    }
    Ok(result)
}

/// The jobs of the big scenario, by id.
const JOBS: u32 = 250;
const MISFIT: u32 = 7;
const RETRIED: u32 = 11;
/// Rows 180..240 have a priority, 1 to 3 (20 each); rows 240..250 a delay.
const FIRST_PRIORITIZED: u32 = 180;
const FIRST_DELAYED: u32 = 240;
const DELAY_MS: u64 = 700;
const BATCH: usize = 50;

fn id(n: u32) -> String {
    format!("row-{n}")
}

fn priority_of(n: u32) -> Option<u32> {
    (FIRST_PRIORITIZED..FIRST_DELAYED)
        .contains(&n)
        .then(|| 1 + (n - FIRST_PRIORITIZED) % 3)
}

fn quiet(n: u32) -> bool {
    n % 10 == 3
}

/// What the Node producer adds: `{name, data, opts}` for rows 0..250.
fn node_jobs() -> serde_json::Value {
    let jobs: Vec<serde_json::Value> = (0..JOBS)
        .map(|n| {
            let mut data = serde_json::json!({"n": n});
            let mut opts = serde_json::json!({"jobId": id(n)});
            if n == MISFIT {
                // Not a `Row`: three attempts, none of which could ever fit.
                data = serde_json::json!({"n": "seven"});
                opts["attempts"] = 3.into();
            }
            if n == RETRIED {
                data["failFirst"] = true.into();
                opts["attempts"] = 2.into();
            }
            if quiet(n) {
                data["quiet"] = true.into();
            }
            if let Some(priority) = priority_of(n) {
                opts["priority"] = priority.into();
            }
            if n >= FIRST_DELAYED {
                opts["delay"] = DELAY_MS.into();
            }
            serde_json::json!({"name": "row", "data": data, "opts": opts})
        })
        .collect();
    serde_json::Value::Array(jobs)
}

#[tokio::test]
async fn node_bullmq5_adds_jobs_our_batch_worker_runs_and_node_reads_their_results() {
    node_jobs_run_in_batches(Bullmq::V5).await;
}

#[tokio::test]
async fn node_bullmq6_adds_jobs_our_batch_worker_runs_and_node_reads_their_results() {
    node_jobs_run_in_batches(Bullmq::V6).await;
}

async fn node_jobs_run_in_batches(bullmq: Bullmq) {
    let redis = TestRedis::new(&format!("interop-batch-{}", bullmq.major()));
    let prefix = redis.prefix().to_owned();
    let queue = "imports";
    let added = bullmq
        .run(&prefix, &["produce", queue, &node_jobs().to_string()])
        .await;
    let ids: Vec<String> = (0..JOBS).map(id).collect();
    let added: Vec<&str> = added.iter().filter_map(|l| l["added"].as_str()).collect();
    assert_eq!(added, ids, "Node added every job under its id");

    // Everything is waiting before our worker starts: its takes see the whole queue.
    let calls = Arc::new(Calls::default());
    let app = redis
        .app(|b| {
            b.provide_arc(calls.clone())
                .processor(Processor::new(queue).concurrency(2).batch(
                    BATCH,
                    Duration::from_millis(100),
                    rows,
                ))
        })
        .await;
    let q = app.queue::<serde_json::Value>(queue).unwrap();
    let workers = app.start_workers().await.unwrap();
    let counts = wait_until(
        Duration::from_secs(30),
        "every job completed or failed",
        || async {
            let counts = q.get_job_counts().await.unwrap();
            (counts.completed + counts.failed == u64::from(JOBS)).then_some(counts)
        },
    )
    .await;
    assert!(workers.shutdown(SOON).await.is_clean());
    assert_eq!((counts.completed, counts.failed), (249, 1), "{counts:?}");

    // Our handler ran each fitting job once, the retried one twice, the misfit never,
    // and many jobs to a call: the first takes of a full queue were full batches.
    let calls = calls.all();
    let mut runs: HashMap<&str, usize> = HashMap::new();
    for call in &calls {
        for job in call {
            *runs.entry(job.as_str()).or_default() += 1;
        }
    }
    for n in 0..JOBS {
        let expected = match n {
            MISFIT => 0,
            RETRIED => 2,
            _ => 1,
        };
        assert_eq!(
            runs.get(id(n).as_str()).copied().unwrap_or(0),
            expected,
            "runs of {}",
            id(n)
        );
    }
    let sizes: Vec<usize> = calls.iter().map(Vec::len).collect();
    assert!(
        sizes.iter().filter(|&&size| size == BATCH).count() >= 3,
        "full batches of {BATCH}: {sizes:?}"
    );
    assert!(calls.len() <= 20, "few calls for {JOBS} jobs: {sizes:?}");

    // Node counts what we count.
    let theirs = &bullmq.run(&prefix, &["counts", queue]).await[0];
    for (state, count) in [
        ("completed", 249),
        ("failed", 1),
        ("waiting", 0),
        ("active", 0),
        ("delayed", 0),
        ("prioritized", 0),
    ] {
        assert_eq!(theirs[state], count, "Node's {state}: {theirs}");
    }

    // Node's Job.fromId reads each job as one its own worker finished.
    let read = bullmq
        .run(
            &prefix,
            &["jobs", queue, &serde_json::to_string(&ids).unwrap()],
        )
        .await;
    assert_eq!(read.len(), ids.len());
    let jobs: HashMap<String, &serde_json::Value> = read
        .iter()
        .map(|line| {
            let job = &line["job"];
            (job["id"].as_str().expect("found").to_owned(), job)
        })
        .collect();
    for n in (0..JOBS).filter(|&n| n != MISFIT) {
        let job = jobs[&id(n)];
        let what = format!("Node reads {}: {job}", id(n));
        let attempts = if n == RETRIED { 2 } else { 1 };
        assert_eq!(job["state"], "completed", "{what}");
        let value = if quiet(n) {
            serde_json::Value::Null
        } else {
            receipt(n, attempts)
        };
        assert_eq!(job["returnvalue"], value, "{what}");
        assert_eq!(job["attemptsMade"], attempts, "{what}");
        assert_eq!(job["attemptsStarted"], attempts, "{what}");
        if n != RETRIED {
            assert_eq!(job["failedReason"], serde_json::Value::Null, "{what}");
        }
        let (added, processed, finished) = (
            job["timestamp"].as_u64().unwrap(),
            job["processedOn"].as_u64().expect("processedOn"),
            job["finishedOn"].as_u64().expect("finishedOn"),
        );
        assert!(added <= processed && processed <= finished, "{what}");
        if n >= FIRST_DELAYED {
            assert!(
                processed - added >= DELAY_MS,
                "not before its delay: {what}"
            );
        }
        assert_eq!(job["priority"], priority_of(n).unwrap_or(0), "{what}");
    }
    // As Node's workers leave a job that failed once and then completed: the failed
    // attempt's reason and its record.
    let retried = jobs[&id(RETRIED)];
    let first_failure = "rust batch says: row 11 failed attempt 1";
    assert_eq!(retried["failedReason"], first_failure, "{retried}");
    assert_eq!(
        retried["stacktrace"],
        serde_json::json!([first_failure]),
        "{retried}"
    );
    let misfit = jobs[&id(MISFIT)];
    assert_eq!(misfit["state"], "failed", "{misfit}");
    let reason = misfit["failedReason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("payload does not fit") && reason.contains("invalid type"),
        "a reason a person reads: {misfit}"
    );
    assert_eq!(
        (&misfit["attemptsMade"], &misfit["opts"]["attempts"]),
        (&serde_json::json!(1), &serde_json::json!(3)),
        "no retry for a payload that never fits: {misfit}"
    );
    assert!(misfit["finishedOn"].as_u64().is_some(), "{misfit}");

    // BullMQ's order: the jobs without a priority first, then by priority, lowest
    // first. Each take is one script call, and its jobs' processedOn is its time, so
    // the takes' order shows in processedOn (the retried job's is its second take's).
    let processed = |n: u32| jobs[&id(n)]["processedOn"].as_u64().unwrap();
    let plain_last = (0..FIRST_PRIORITIZED)
        .filter(|&n| n != RETRIED)
        .map(processed)
        .max()
        .unwrap();
    let mut before = plain_last;
    for priority in 1..=3 {
        let of = (FIRST_PRIORITIZED..FIRST_DELAYED).filter(|&n| priority_of(n) == Some(priority));
        let (first, last) = (
            of.clone().map(processed).min().unwrap(),
            of.map(processed).max().unwrap(),
        );
        assert!(
            before <= first,
            "priority {priority} taken at {first}, after the jobs before it (by {before})"
        );
        before = last;
    }

    // The events stream: each job's own `active` per attempt and one `completed` with
    // its return value, or one `failed`, as Node's workers write them ...
    let events = stream_events(&prefix, queue);
    for n in 0..JOBS {
        let of = |name: &str| -> Vec<&HashMap<String, String>> {
            events
                .iter()
                .filter(|e| e["event"] == name && e.get("jobId") == Some(&id(n)))
                .collect()
        };
        let (active, completed, failed) = (of("active"), of("completed"), of("failed"));
        let what = format!("the events of {}", id(n));
        match n {
            MISFIT => {
                assert_eq!((active.len(), completed.len()), (1, 0), "{what}");
                assert_eq!(failed.len(), 1, "{what}");
                assert_eq!(failed[0]["failedReason"], reason, "{what}");
            }
            _ => {
                let attempts = if n == RETRIED { 2 } else { 1 };
                assert_eq!(active.len(), attempts, "{what}");
                assert_eq!(completed.len(), 1, "{what}");
                let value: serde_json::Value =
                    serde_json::from_str(&completed[0]["returnvalue"]).unwrap();
                assert_eq!(value, jobs[&id(n)]["returnvalue"].clone(), "{what}");
            }
        }
    }
    // ... which Node's QueueEvents reads: a `completed` for every job that completed.
    let heard = bullmq.run(&prefix, &["events", queue, "249"]).await;
    let completed: BTreeSet<&str> = heard
        .iter()
        .filter(|e| e["event"] == "completed")
        .filter_map(|e| e["jobId"].as_str())
        .collect();
    assert_eq!(completed.len(), 249);
    let heard_retried = heard
        .iter()
        .find(|e| e["event"] == "completed" && e["jobId"] == id(RETRIED).as_str())
        .expect("Node heard the retried job complete");
    assert_eq!(heard_retried["returnvalue"], receipt(RETRIED, 2));
}

/// The entries of the queue's events stream, each as its fields.
fn stream_events(prefix: &str, queue: &str) -> Vec<HashMap<String, String>> {
    let mut conn = queue_tests::sync_connection();
    let entries: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg(format!("{prefix}:{queue}:events"))
        .arg("-")
        .arg("+")
        .query(&mut *conn)
        .expect("XRANGE");
    entries
        .into_iter()
        .map(|(_, fields)| {
            fields
                .chunks_exact(2)
                .map(|pair| (pair[0].clone(), pair[1].clone()))
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn bull_board_lists_a_batch_workers_jobs_as_a_node_workers() {
    let redis = TestRedis::new("interop-batch-board");
    let prefix = redis.prefix().to_owned();
    let (queue, control) = ("board-rows", "board-control");
    // Rows 0..12: row 5 quiet, row 9 not a `Row`, row 10 failed by the handler.
    let mut jobs = Vec::new();
    for n in 0..12u32 {
        let (mut data, mut opts) = (
            serde_json::json!({"n": n}),
            serde_json::json!({"jobId": id(n)}),
        );
        match n {
            5 => data["quiet"] = true.into(),
            9 => {
                data = serde_json::json!({"n": [9]});
                opts["attempts"] = 2.into();
            }
            10 => data["failAlways"] = true.into(),
            _ => {}
        }
        jobs.push(serde_json::json!({"name": "row", "data": data, "opts": opts}));
    }
    let jobs = serde_json::Value::Array(jobs).to_string();
    Bullmq::V5.run(&prefix, &["produce", queue, &jobs]).await;

    let calls = Arc::new(Calls::default());
    let app = redis
        .app(|b| {
            b.provide_arc(calls.clone())
                .processor(Processor::new(queue).batch(BATCH, Duration::from_millis(50), rows))
        })
        .await;
    let q = app.queue::<serde_json::Value>(queue).unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "every job completed or failed", || async {
        let counts = q.get_job_counts().await.unwrap();
        (counts.completed + counts.failed == 12).then_some(())
    })
    .await;
    assert!(workers.shutdown(SOON).await.is_clean());
    assert!(
        calls.all().iter().any(|call| call.len() > 1),
        "{:?}",
        calls.all()
    );

    // The same kind of jobs run by Node's own worker, for what Bull Board shows of those.
    let node_jobs = serde_json::json!([
        {"name": "row", "data": {"n": 1}, "opts": {"jobId": "node-done"}},
        {"name": "row", "data": {"failAlways": true}, "opts": {"jobId": "node-failed"}}
    ]);
    Bullmq::V5
        .run(&prefix, &["produce", control, &node_jobs.to_string()])
        .await;
    Bullmq::V5.run(&prefix, &["work", control, "2"]).await;

    let ours = q.get_job_counts().await.unwrap();
    assert_eq!((ours.completed, ours.failed), (10, 2), "{ours:?}");

    // In Redis, a job of a batch is what a Node worker leaves: the same fields in its
    // hash, completed or failed, and events of the same shapes on the stream.
    for (ours, theirs) in [("row-1", "node-done"), ("row-10", "node-failed")] {
        let (ours, theirs) = (hash(&prefix, queue, ours), hash(&prefix, control, theirs));
        assert_eq!(
            ours.keys().collect::<Vec<_>>(),
            theirs.keys().collect::<Vec<_>>(),
            "ours {ours:?} / Node's {theirs:?}"
        );
    }
    let (ours, theirs) = (
        event_shapes(&stream_events(&prefix, queue)),
        event_shapes(&stream_events(&prefix, control)),
    );
    assert_eq!(ours, theirs);
    for event in [
        "active",
        "completed",
        "failed",
        "retries-exhausted",
        "drained",
    ] {
        assert!(
            ours.iter().any(|(name, _)| name == event),
            "{event} in {ours:?}"
        );
    }
    for (bullmq, board_major) in [
        (Bullmq::V5, "9"),
        (Bullmq::V6, "9"),
        (Bullmq::V5, "6"),
        (Bullmq::V6, "6"),
    ] {
        let view = |queue: &'static str, status: &'static str| {
            let prefix = prefix.clone();
            async move {
                let args = ["board", queue, status, board_major];
                bullmq.run(&prefix, &args).await.remove(0)
            }
        };
        let completed = view(queue, "completed").await;
        let version = completed["boardVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let what = format!("Bull Board {version} on BullMQ {}", bullmq.major());
        assert!(version.starts_with(&format!("{board_major}.")), "{what}");
        for (state, count) in [
            ("completed", 10),
            ("failed", 2),
            ("waiting", 0),
            ("active", 0),
        ] {
            assert_eq!(
                completed["counts"][state], count,
                "{what}: {state} in {}",
                completed["counts"]
            );
        }

        let listed = completed["jobs"].as_array().expect("the completed jobs");
        let row_1 = listed.iter().find(|j| j["id"] == "row-1").expect("row-1");
        let mut ids: Vec<&str> = listed.iter().filter_map(|j| j["id"].as_str()).collect();
        ids.sort_unstable();
        let mut expected: Vec<String> = [0, 1, 2, 3, 4, 5, 6, 7, 8, 11].map(id).into();
        expected.sort_unstable();
        assert_eq!(ids, expected, "{what}");
        for job in listed {
            let n = job["data"]["n"].as_u64().unwrap() as u32;
            let value = if n == 5 {
                serde_json::Value::Null
            } else {
                receipt(n, 1)
            };
            assert_eq!(job["returnValue"], value, "{what}: {job}");
            assert_eq!(job["attempts"], 1, "{what}: {job}");
            assert_eq!(job["isFailed"], false, "{what}: {job}");
            assert!(
                job["processedOn"].as_u64() <= job["finishedOn"].as_u64(),
                "{what}: {job}"
            );
            assert!(job["processedOn"].as_u64().is_some(), "{what}: {job}");
        }

        let failed = view(queue, "failed").await;
        let listed = failed["jobs"].as_array().expect("the failed jobs");
        let by_id = |wanted: &str| {
            listed
                .iter()
                .find(|j| j["id"] == wanted)
                .unwrap_or_else(|| panic!("{what}: {wanted} listed as failed in {listed:?}"))
        };
        assert_eq!(listed.len(), 2, "{what}: {listed:?}");
        let misfit = by_id("row-9");
        let reason = misfit["failedReason"].as_str().unwrap_or_default();
        assert!(reason.contains("payload does not fit"), "{what}: {misfit}");
        assert_eq!(misfit["data"], serde_json::json!({"n": [9]}), "{what}");
        assert_eq!(misfit["attempts"], 1, "{what}: no retry: {misfit}");
        let refused = by_id("row-10");
        assert_eq!(
            refused["failedReason"], "rust batch says: row 10 failed attempt 1",
            "{what}: {refused}"
        );
        for job in [misfit, refused] {
            assert_eq!(job["isFailed"], true, "{what}: {job}");
            assert_eq!(
                job["stacktrace"].as_array().map(Vec::len),
                Some(1),
                "{what}: {job}"
            );
        }

        // What Bull Board shows of a job: the same fields as of a Node worker's.
        let theirs_completed = view(control, "completed").await;
        let theirs_failed = view(control, "failed").await;
        assert_eq!(
            fields(row_1),
            fields(&theirs_completed["jobs"][0]),
            "{what}: ours {row_1} / Node's {}",
            theirs_completed["jobs"][0]
        );
        assert_eq!(
            fields(refused),
            fields(&theirs_failed["jobs"][0]),
            "{what}: ours {refused} / Node's {}",
            theirs_failed["jobs"][0]
        );
    }
}

/// The names of a JSON object's fields.
fn fields(value: &serde_json::Value) -> BTreeSet<&str> {
    value
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// A job's hash, read as any client reads it.
fn hash(prefix: &str, queue: &str, id: &str) -> std::collections::BTreeMap<String, String> {
    let mut conn = queue_tests::sync_connection();
    redis::cmd("HGETALL")
        .arg(format!("{prefix}:{queue}:{id}"))
        .query(&mut *conn)
        .expect("HGETALL")
}

/// Each kind of event on a stream, with the names of its fields.
fn event_shapes(events: &[HashMap<String, String>]) -> BTreeSet<(String, BTreeSet<String>)> {
    events
        .iter()
        .map(|event| (event["event"].clone(), event.keys().cloned().collect()))
        .collect()
}
