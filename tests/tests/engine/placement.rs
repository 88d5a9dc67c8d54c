//! Engine change 27 (`queue-engine/PATCHES.md`): a processor that holds its thread makes
//! the next ones run in tasks of their own, and there they finish, fail and are
//! cancelled as they would in place. Tested on the engine's own API, against a real
//! Redis, on a multi-thread runtime (a current-thread one never spreads).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bullmq::options::RedisConnectionOptions;
use bullmq::{BulkJob, JobOptions, Queue, QueueOptions, Worker, WorkerOptions};
use queue_tests::{redis_url, wait_until, TestRedis, SOON};
use tokio::sync::mpsc;

/// Longer than the engine's threshold (250 µs) for a poll that holds its thread.
const COMPUTES_FOR: Duration = Duration::from_millis(1);

fn compute() {
    let started = Instant::now();
    while started.elapsed() < COMPUTES_FOR {
        std::hint::spin_loop();
    }
}

/// Each job's task, by job id.
type TaskOfJob = Arc<Mutex<HashMap<String, String>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processors_that_compute_run_in_tasks_of_their_own_and_end_as_in_place() {
    let redis = TestRedis::new("patch-placement");
    let options = QueueOptions::new()
        .connection(RedisConnectionOptions::new().url(redis_url()))
        .prefix(redis.prefix().to_owned());
    let q = Queue::with_options("placement", options).await.unwrap();
    // Waiting before the worker starts, so that at concurrency 1 each completion
    // fetches the next job into the same slot's task: in place, jobs share tasks.
    let mut jobs: Vec<BulkJob> = (0..8)
        .map(|i| {
            BulkJob::new("computes", serde_json::json!({ "n": i }))
                .options(JobOptions::new().job_id(format!("computes-{i}")))
        })
        .collect();
    jobs.push(
        BulkJob::new("fails", serde_json::json!({}))
            .options(JobOptions::new().job_id("fails-1").attempts(1)),
    );
    jobs.push(
        BulkJob::new("waits", serde_json::json!({}))
            .options(JobOptions::new().job_id("waits-1").attempts(1)),
    );
    q.add_bulk(jobs).await.unwrap();

    let tasks = TaskOfJob::default();
    let (started_tx, mut started) = mpsc::unbounded_channel::<String>();
    let seen = tasks.clone();
    let processor: bullmq::worker::ProcessorFn = Arc::new(move |job, cancel| {
        let seen = seen.clone();
        let started_tx = started_tx.clone();
        Box::pin(async move {
            let id = job.id().to_owned();
            let task = tokio::task::id().to_string();
            seen.lock().unwrap().insert(id.clone(), task);
            compute();
            match job.name() {
                "computes" => {
                    Ok(serde_json::json!({ "doubled": job.data()["n"].as_i64().unwrap_or(-1) * 2 }))
                }
                "fails" => Err(bullmq::Error::ProcessingError(
                    "it failed on purpose".into(),
                )),
                _ => {
                    let _ = started_tx.send(id);
                    cancel.cancelled().await;
                    Err(bullmq::Error::ProcessingError("cancelled".into()))
                }
            }
        })
    });
    let worker = Worker::with_options(
        "placement",
        processor,
        WorkerOptions {
            connection: RedisConnectionOptions::new().url(redis_url()),
            prefix: redis.prefix().to_owned(),
            drain_delay: 1,
            concurrency: 1,
            ..Default::default()
        },
    )
    .await
    .unwrap();

    let waiting = tokio::time::timeout(SOON, started.recv())
        .await
        .expect("the waiting job started")
        .unwrap();
    assert!(
        worker.cancel_job(&waiting).await,
        "the running job is known"
    );
    wait_until(SOON, "every job ended", || async {
        let counts = q.get_job_counts().await.unwrap();
        (counts.completed == 8 && counts.failed == 2).then_some(())
    })
    .await;

    for i in 0..8 {
        let job = q.get_job(&format!("computes-{i}")).await.unwrap().unwrap();
        let value: serde_json::Value = serde_json::from_str(job.returnvalue()).unwrap();
        assert_eq!(value, serde_json::json!({ "doubled": i * 2 }));
    }
    let failed = q.get_job("fails-1").await.unwrap().unwrap();
    assert_eq!(failed.failed_reason(), "it failed on purpose");
    let cancelled = q.get_job("waits-1").await.unwrap().unwrap();
    assert_eq!(cancelled.failed_reason(), "cancelled");

    // Every job after the first ran in a task of its own: no two share one.
    let tasks = tasks.lock().unwrap().clone();
    assert_eq!(tasks.len(), 10);
    let first = tasks["computes-0"].clone();
    let mut others: Vec<&String> = tasks
        .iter()
        .filter(|(id, _)| id.as_str() != "computes-0")
        .map(|(_, task)| task)
        .collect();
    others.sort();
    others.dedup();
    assert_eq!(others.len(), 9, "a task each: {tasks:?}");
    assert!(!others.contains(&&first), "{tasks:?}");
    worker.close(5000).await.unwrap();
}
