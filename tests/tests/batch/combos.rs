//! Batches with what else exists: priorities, delays, the rate limit (a batch counts
//! its jobs), flows (a child in a batch completes its parent), waiting on a job's
//! outcome, and the apps without Redis (inline mode, the testing kit) where a batch
//! handler's job runs as a batch of one.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queue_core::testing::{inline_jobs, InlineOutcome, TestApp};
use queue_core::worker::{Batch, BatchResult};
use queue_core::{
    ChildResults, Dep, Job, JobError, JobOptions, JobOutcome, OnChildFailure, Processor, QueueApp,
};
use queue_tests::{wait_for_completed, TestRedis, SOON};

/// Each call's job data and when it started.
#[derive(Default)]
struct Calls(Mutex<Vec<(Vec<u32>, Instant)>>);

impl Calls {
    fn batches(&self) -> Vec<Vec<u32>> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(b, _)| b.clone())
            .collect()
    }
}

/// Completes each job with its data times ten.
async fn tenfold(batch: Batch<u32>, calls: Dep<Calls>) -> Result<BatchResult, JobError> {
    calls
        .0
        .lock()
        .unwrap()
        .push((batch.iter().map(|j| j.data).collect(), Instant::now()));
    let mut result = BatchResult::new();
    for job in &batch {
        result.complete(job, job.data * 10);
    }
    Ok(result)
}

fn app(redis: &TestRedis, calls: &Arc<Calls>, processor: Processor) -> queue_core::QueueAppBuilder {
    redis
        .builder()
        .provide_arc(calls.clone())
        .processor(processor)
}

#[tokio::test]
async fn a_batch_takes_prioritized_jobs_by_priority_and_delayed_ones_when_due() {
    let redis = TestRedis::new("batch-order");
    let calls = Arc::new(Calls::default());
    let processor = Processor::new("rows").batch(10, Duration::from_millis(100), tenfold);
    let app = app(&redis, &calls, processor).build().await.unwrap();
    let q = app.queue::<u32>("rows").unwrap();
    for (data, priority) in [(3, 3), (1, 1), (2, 2)] {
        q.add("row", data, JobOptions::new().priority(priority))
            .await
            .unwrap();
    }
    let delayed_at = Instant::now();
    q.add(
        "row",
        9,
        JobOptions::new().delay(Duration::from_millis(800)),
    )
    .await
    .unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_completed(&q, 4, SOON).await;
    workers.shutdown(SOON).await;

    let calls = calls.0.lock().unwrap().clone();
    assert_eq!(
        calls[0].0,
        vec![1, 2, 3],
        "by priority, the delayed job not yet"
    );
    let (late, at) = calls.last().unwrap();
    assert_eq!(late, &vec![9]);
    assert!(
        *at - delayed_at >= Duration::from_millis(750),
        "{:?}",
        *at - delayed_at
    );
}

#[tokio::test]
async fn a_batch_counts_its_jobs_against_the_rate_limit() {
    let redis = TestRedis::new("batch-rate");
    let calls = Arc::new(Calls::default());
    let processor = Processor::new("rows")
        .limiter(4, Duration::from_millis(600))
        .batch(20, Duration::ZERO, tenfold);
    let app = app(&redis, &calls, processor).build().await.unwrap();
    let q = app.queue::<u32>("rows").unwrap();
    for n in 0..10 {
        q.add("row", n, JobOptions::new()).await.unwrap();
    }
    let workers = app.start_workers().await.unwrap();
    wait_for_completed(&q, 10, SOON).await;
    workers.shutdown(SOON).await;

    let calls = calls.0.lock().unwrap().clone();
    assert!(
        calls.iter().all(|(batch, _)| batch.len() <= 4),
        "no batch past the window's 4: {:?}",
        calls.iter().map(|(b, _)| b.len()).collect::<Vec<_>>()
    );
    // Ten jobs at four a window: a third window at least.
    let spread = calls.last().unwrap().1 - calls[0].1;
    assert!(spread >= Duration::from_millis(1_100), "{spread:?}");
}

async fn total(job: Job<String>, children: ChildResults<u32>) -> Result<u32, JobError> {
    let _ = job;
    Ok(children.values().sum())
}

#[tokio::test]
async fn children_completed_by_a_batch_complete_their_parent() {
    let redis = TestRedis::new("batch-flow");
    let calls = Arc::new(Calls::default());
    let app = redis
        .builder()
        .provide_arc(calls.clone())
        .processor(Processor::new("rows").batch(10, Duration::from_millis(200), tenfold))
        .processor(Processor::new("totals").job("total", total))
        .build()
        .await
        .unwrap();
    let rows = app.queue::<u32>("rows").unwrap();
    let totals = app.queue::<String>("totals").unwrap();
    let mut flow = totals
        .flow_job("total", "nov".into())
        .options(JobOptions::new().job_id("total-nov"));
    for n in 1..=3 {
        flow = flow.child(OnChildFailure::FailParent, rows.flow_job("row", n));
    }
    app.add_flow(flow).await.unwrap();
    let workers = app.start_workers().await.unwrap();
    let outcome = totals.wait_for_job("total-nov", SOON).await.unwrap();
    workers.shutdown(SOON).await;
    assert_eq!(outcome, JobOutcome::Completed(serde_json::json!(60)));
    assert_eq!(
        calls.batches(),
        vec![vec![1, 2, 3]],
        "the children in one batch"
    );
}

#[tokio::test]
async fn a_job_waited_on_gets_its_own_result_from_its_batch() {
    let redis = TestRedis::new("batch-wait-result");
    let calls = Arc::new(Calls::default());
    let processor = Processor::new("rows").batch(10, Duration::from_millis(300), tenfold);
    let app = app(&redis, &calls, processor).build().await.unwrap();
    let q = app.queue::<u32>("rows").unwrap();
    let workers = app.start_workers().await.unwrap();
    let (a, b) = tokio::join!(
        async { q.add("row", 4, JobOptions::new()).await.unwrap() },
        async { q.add("row", 7, JobOptions::new()).await.unwrap() }
    );
    let (a, b) = tokio::join!(a.wait(SOON), b.wait(SOON));
    workers.shutdown(SOON).await;
    assert_eq!(a.unwrap(), JobOutcome::Completed(serde_json::json!(40)));
    assert_eq!(b.unwrap(), JobOutcome::Completed(serde_json::json!(70)));
    assert_eq!(calls.batches().concat().len(), 2);
}

async fn checked(batch: Batch<u32>) -> Result<BatchResult, JobError> {
    let mut result = BatchResult::new();
    for job in &batch {
        match job.data {
            0 => result.fail(job, JobError::unrecoverable("zero is not a row")),
            n => result.complete(job, n + 1),
        };
    }
    Ok(result)
}

#[tokio::test]
async fn without_redis_a_batch_handlers_job_runs_as_a_batch_of_one() {
    // Inline mode: each add runs its handler at once.
    let app = QueueApp::builder()
        .processor(Processor::new("rows").batch(10, Duration::from_millis(20), checked))
        .build_inline()
        .unwrap();
    let rows = app.queue::<u32>("rows").unwrap();
    rows.add("row", 41, JobOptions::new()).await.unwrap();
    rows.add("row", 0, JobOptions::new()).await.unwrap();
    let jobs = inline_jobs(&app);
    assert_eq!(
        jobs[0].outcome,
        InlineOutcome::Completed {
            value: serde_json::json!(42)
        }
    );
    assert!(
        matches!(&jobs[1].outcome, InlineOutcome::Failed { reason, .. } if reason == "zero is not a row"),
        "{:?}",
        jobs[1].outcome
    );

    // The testing kit's drain runs the real worker: batches.
    let redis = TestRedis::new("batch-kit");
    let kit = TestApp::new(redis.builder().processor(Processor::new("rows").batch(
        10,
        Duration::from_millis(20),
        checked,
    )))
    .await
    .unwrap();
    let rows = kit.app().queue::<u32>("rows").unwrap();
    for n in 1..=5 {
        rows.add("row", n, JobOptions::new()).await.unwrap();
    }
    let drained = kit.drain_queue("rows").await.unwrap();
    assert_eq!(drained.len(), 5);
    assert!(drained.iter().all(|d| d.attempts == 1), "{drained:?}");
}
