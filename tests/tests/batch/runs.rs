//! How batches run: what `wait` gathers and how long, locks renewed for a batch that
//! runs longer than its lock, and a shutdown in the middle of a batch.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queue_core::worker::{Batch, BatchResult};
use queue_core::{Dep, JobError, JobOptions, Processor, WorkerEvent};
use queue_tests::{wait_for_completed, wait_until, TestRedis, SOON};

/// Each call's size and when it started.
#[derive(Default)]
struct Calls(Mutex<Vec<(usize, Instant)>>);

async fn record(batch: Batch<u32>, calls: Dep<Calls>) -> Result<BatchResult, JobError> {
    calls.0.lock().unwrap().push((batch.len(), Instant::now()));
    // A job's data is how long its batch takes, in ms.
    let longest = batch.iter().map(|job| job.data).max().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(u64::from(longest))).await;
    Ok(BatchResult::new())
}

fn app(
    redis: &TestRedis,
    calls: &Arc<Calls>,
    size: usize,
    wait: Duration,
) -> queue_core::QueueAppBuilder {
    redis
        .builder()
        .provide_arc(calls.clone())
        .processor(Processor::new("rows").batch(size, wait, record))
}

#[tokio::test]
async fn a_batch_waits_for_more_jobs_up_to_its_wait_and_no_longer() {
    let redis = TestRedis::new("batch-wait");
    let calls = Arc::new(Calls::default());
    let app = app(&redis, &calls, 10, Duration::from_millis(700))
        .build()
        .await
        .unwrap();
    let q = app.queue::<u32>("rows").unwrap();
    let workers = app.start_workers().await.unwrap();

    // One job, then two more while the batch waits: one batch of three.
    let first = Instant::now();
    q.add("row", 0, JobOptions::new()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    q.add("row", 0, JobOptions::new()).await.unwrap();
    q.add("row", 0, JobOptions::new()).await.unwrap();
    wait_for_completed(&q, 3, SOON).await;
    let (size, started) = calls.0.lock().unwrap()[0];
    assert_eq!(
        size, 3,
        "the jobs that came within the wait joined the batch"
    );
    let waited = started - first;
    assert!(
        waited >= Duration::from_millis(600),
        "it waited its 700 ms: {waited:?}"
    );
    assert!(waited < Duration::from_secs(3), "and no longer: {waited:?}");

    // A full batch does not wait.
    let before = Instant::now();
    for _ in 0..10 {
        q.add("row", 0, JobOptions::new()).await.unwrap();
    }
    wait_for_completed(&q, 13, SOON).await;
    let calls_now = calls.0.lock().unwrap().clone();
    let full = calls_now.iter().find(|(_, at)| *at >= before).copied();
    workers.shutdown(SOON).await;
    let (size, at) = full.expect("a second batch");
    assert!(size >= 1);
    if size == 10 {
        assert!(
            at - before < Duration::from_millis(600),
            "a full batch runs at once"
        );
    }
}

#[tokio::test]
async fn a_batch_longer_than_its_lock_keeps_its_jobs() {
    let redis = TestRedis::new("batch-lock");
    let calls = Arc::new(Calls::default());
    let app = redis
        .builder()
        .provide_arc(calls.clone())
        .processor(
            Processor::new("rows")
                .lock_duration(Duration::from_millis(600))
                .stalled_interval(Duration::from_millis(200))
                .batch(5, Duration::from_millis(50), record),
        )
        .build()
        .await
        .unwrap();
    let q = app.queue::<u32>("rows").unwrap();
    let mut events = app.worker_events();
    for _ in 0..5 {
        // Four lock durations.
        q.add("row", 2_400, JobOptions::new()).await.unwrap();
    }
    let workers = app.start_workers().await.unwrap();
    wait_for_completed(&q, 5, SOON).await;
    workers.shutdown(SOON).await;
    let sizes: Vec<usize> = calls.0.lock().unwrap().iter().map(|(s, _)| *s).collect();
    assert_eq!(
        sizes.iter().sum::<usize>(),
        5,
        "each job ran once: {sizes:?}"
    );
    for event in received(&mut events).await {
        assert!(
            !matches!(
                event,
                WorkerEvent::Stalled { .. } | WorkerEvent::LockLost { .. }
            ),
            "{event:?}"
        );
    }
}

#[tokio::test]
async fn a_shutdown_lets_the_running_batch_finish() {
    let redis = TestRedis::new("batch-shutdown");
    let calls = Arc::new(Calls::default());
    let app = app(&redis, &calls, 20, Duration::ZERO)
        .build()
        .await
        .unwrap();
    let q = app.queue::<u32>("rows").unwrap();
    for _ in 0..20 {
        q.add("row", 800, JobOptions::new()).await.unwrap();
    }
    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "the batch started", || {
        std::future::ready((!calls.0.lock().unwrap().is_empty()).then_some(()))
    })
    .await;
    let report = workers.shutdown(SOON).await;
    assert!(report.is_clean(), "{report:?}");
    let counts = q.get_job_counts().await.unwrap();
    assert_eq!((counts.completed, counts.active), (20, 0), "{counts:?}");
}

/// The worker events received so far (those already sent: each wait is short).
async fn received(events: &mut queue_core::events::WorkerEvents) -> Vec<WorkerEvent> {
    let mut all = Vec::new();
    while let Ok(Some(event)) =
        tokio::time::timeout(Duration::from_millis(200), events.recv()).await
    {
        all.push(event);
    }
    all
}

/// A misfit among rows: its attempt ends at once, but the engine finishes it with the
/// rest of the batch, so its lock must be renewed until then.
async fn rows_or_misfit(batch: Batch<u32>, calls: Dep<Calls>) -> Result<BatchResult, JobError> {
    record(batch, calls).await
}

#[tokio::test]
async fn a_job_whose_attempt_ends_early_keeps_its_lock_until_its_batch_ends() {
    let redis = TestRedis::new("batch-early-lock");
    let calls = Arc::new(Calls::default());
    let app = redis
        .builder()
        .provide_arc(calls.clone())
        .processor(
            Processor::new("rows")
                .lock_duration(Duration::from_millis(600))
                .stalled_interval(Duration::from_millis(200))
                .batch(5, Duration::from_millis(50), rows_or_misfit),
        )
        .build()
        .await
        .unwrap();
    let q = app.queue::<serde_json::Value>("rows").unwrap();
    let mut events = app.worker_events();
    for _ in 0..4 {
        // Four lock durations.
        q.add("row", serde_json::json!(2_400), JobOptions::new())
            .await
            .unwrap();
    }
    q.add(
        "row",
        serde_json::json!("not a number"),
        JobOptions::new().job_id("misfit").attempts(3),
    )
    .await
    .unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_completed(&q, 4, SOON).await;
    workers.shutdown(SOON).await;
    let misfit = q.get_job("misfit").await.unwrap().unwrap();
    assert_eq!(
        misfit.attempts_made, 1,
        "failed once, not stalled: {misfit:?}"
    );
    assert!(
        misfit
            .failed_reason
            .as_deref()
            .is_some_and(|r| r.contains("payload does not fit")),
        "{misfit:?}"
    );
    for event in received(&mut events).await {
        assert!(
            !matches!(
                event,
                WorkerEvent::Stalled { .. } | WorkerEvent::LockLost { .. }
            ),
            "{event:?}"
        );
    }
}

/// Holds every batch until the test opens it.
struct Gate(tokio::sync::watch::Sender<bool>);

async fn held(batch: Batch<u32>, gate: Dep<Gate>) -> Result<BatchResult, JobError> {
    let _ = batch.len();
    let _ = gate.0.subscribe().wait_for(|open| *open).await;
    Ok(BatchResult::new())
}

#[tokio::test]
async fn a_worker_busy_with_a_long_batch_is_alive_while_jobs_wait() {
    let redis = TestRedis::new("batch-alive");
    let gate = Arc::new(Gate(tokio::sync::watch::channel(false).0));
    let app = redis
        .builder()
        .provide_arc(gate.clone())
        .processor(
            Processor::new("rows")
                .concurrency(1)
                .batch(100, Duration::ZERO, held),
        )
        .build()
        .await
        .unwrap();
    let q = app.queue::<u32>("rows").unwrap();
    let health = app
        .health(queue_core::health::HealthSettings::new().wedged_after(Duration::from_millis(500)));
    let workers = app.start_workers().await.unwrap();
    q.add("row", 0, JobOptions::new()).await.unwrap();
    wait_until(SOON, "the first batch to run", || async {
        (q.get_job_counts().await.unwrap().active == 1).then_some(())
    })
    .await;
    for n in 1..5 {
        q.add("row", n, JobOptions::new()).await.unwrap();
    }
    // Past the period with jobs waiting: its one slot holds a batch, so it is busy,
    // not wedged (counted by jobs, 1 of 100 slots, it looked free and stuck).
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1_500) {
        let report = health.live().await;
        let worker = report
            .checks
            .iter()
            .find(|c| c.name == "worker:rows")
            .cloned()
            .expect("the worker's check");
        assert!(report.is_healthy(), "{worker:?}");
        assert!(worker.detail.contains("1 of 1 slots busy"), "{worker:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = gate.0.send(true);
    wait_for_completed(&q, 5, SOON).await;
    workers.shutdown(SOON).await;
}
