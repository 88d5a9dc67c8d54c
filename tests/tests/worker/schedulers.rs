//! Job schedulers under the races BullMQ's schedulers were filed for in 2025 (#48):
//! upserts from many processes at once, an update while the next job waits or while the
//! current one runs, a removal while it runs. Each leaves one scheduler (or none) and
//! one next job (or none), with the latest template.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use queue_core::options::Schedule;
use queue_core::prelude::*;
use queue_core::{JobInfo, Workers};
use queue_tests::{wait_until, TestRedis, SOON};
use tokio::sync::Notify;

/// Schedules whose next run is months away: their next job waits, delayed.
static NEW_YEAR: std::sync::LazyLock<Schedule> =
    std::sync::LazyLock::new(|| Schedule::cron("0 0 1 1 *"));
static MID_YEAR: std::sync::LazyLock<Schedule> =
    std::sync::LazyLock::new(|| Schedule::cron("0 0 1 7 *"));

/// Jobs of the scheduler that wait to run: delayed or waiting.
async fn next_jobs(q: &Queue<u64>) -> Vec<JobInfo> {
    q.get_jobs(&[JobState::Delayed, JobState::Waiting], 0..100)
        .await
        .expect("a listing")
}

#[tokio::test]
async fn ten_processes_upserting_one_scheduler_at_once_leave_one_scheduler_and_one_next_job() {
    let redis = TestRedis::new("sched-upserts");
    // Ten apps, each its own connections, as ten processes starting at once.
    let apps = join_all((0..10).map(|_| redis.app(|b| b))).await;
    let queues: Vec<Queue<u64>> = apps
        .iter()
        .map(|app| app.queue::<u64>("reports").expect("the queue"))
        .collect();
    let upserts = queues.iter().enumerate().map(|(n, q)| {
        // Each its own interval and data: whichever wins, one remains.
        let every = Schedule::every(Duration::from_secs(3_600 + n as u64));
        q.upsert_scheduler("daily", every, "report", n as u64, JobOptions::new())
    });
    for result in join_all(upserts).await {
        result.expect("an upsert");
    }
    let q = &queues[0];
    assert_eq!(q.scheduler_count().await.expect("a count"), 1);
    let next = next_jobs(q).await;
    assert_eq!(next.len(), 1, "one next job, not {}", next.len());
}

#[tokio::test]
async fn updating_a_scheduler_while_its_next_job_waits_replaces_that_job() {
    let redis = TestRedis::new("sched-update-delayed");
    let app = redis.app(|b| b).await;
    let q = app.queue::<u64>("reports").expect("the queue");
    q.upsert_scheduler("yearly", NEW_YEAR.clone(), "report", 1, JobOptions::new())
        .await
        .expect("an upsert");
    let before = next_jobs(&q).await;
    assert_eq!(before.len(), 1);
    q.upsert_scheduler("yearly", MID_YEAR.clone(), "report", 2, JobOptions::new())
        .await
        .expect("an update");
    let after = next_jobs(&q).await;
    assert_eq!(after.len(), 1, "one next job: {after:?}");
    assert_eq!(after[0].data, serde_json::json!(2), "the new template");
    assert_ne!(after[0].id, before[0].id, "the job of the new schedule");
    assert_eq!(
        q.get_job_state(&after[0].id).await.expect("a state"),
        Some(JobState::Delayed)
    );
    assert_eq!(q.scheduler_count().await.expect("a count"), 1);
}

/// A handler that holds its first run until told, and counts every run.
#[derive(Default)]
struct Gate {
    release: Notify,
    started: Notify,
}

async fn held(job: Job<u64>, gate: Dep<Gate>) -> Result<u64, JobError> {
    gate.started.notify_one();
    gate.release.notified().await;
    Ok(job.data)
}

/// A scheduler `ticks` (every 300 ms, data 1) whose first run is running, held.
struct Ticking {
    _redis: TestRedis,
    _app: QueueApp,
    queue: Queue<u64>,
    gate: Arc<Gate>,
    workers: Workers,
}

async fn first_tick_running(label: &str) -> Ticking {
    let redis = TestRedis::new(label);
    let gate = Arc::new(Gate::default());
    let app = redis
        .app(|b| {
            b.processor(Processor::new("reports").any_job(held))
                .provide_arc(gate.clone())
        })
        .await;
    let queue = app.queue::<u64>("reports").expect("the queue");
    let soon = Schedule::every(Duration::from_millis(300));
    queue
        .upsert_scheduler("ticks", soon, "report", 1, JobOptions::new())
        .await
        .expect("an upsert");
    let workers = app.start_workers().await.expect("workers start");
    gate.started.notified().await;
    Ticking {
        _redis: redis,
        _app: app,
        queue,
        gate,
        workers,
    }
}

#[tokio::test]
async fn updating_a_scheduler_while_its_job_runs_leaves_one_next_job_with_the_new_template() {
    let ticking = first_tick_running("sched-update-active").await;
    let (q, gate) = (&ticking.queue, &ticking.gate);
    // The first run is active: update the scheduler under it, to a schedule whose next
    // run is months away (an `every` schedule would start again at once).
    q.upsert_scheduler("ticks", NEW_YEAR.clone(), "report", 2, JobOptions::new())
        .await
        .expect("an update");
    gate.release.notify_one();
    wait_until(SOON, "the first run to complete", || async {
        (q.get_job_counts().await.ok()?.completed >= 1).then_some(())
    })
    .await;
    ticking.workers.shutdown(SOON).await;
    let next = next_jobs(q).await;
    assert_eq!(next.len(), 1, "one next job: {next:?}");
    assert_eq!(
        next[0].data,
        serde_json::json!(2),
        "the next job carries the new template"
    );
    assert_eq!(
        q.get_job_state(&next[0].id).await.expect("a state"),
        Some(JobState::Delayed)
    );
    assert_eq!(q.scheduler_count().await.expect("a count"), 1);
}

#[tokio::test]
async fn removing_a_scheduler_while_its_job_runs_leaves_no_next_job() {
    let ticking = first_tick_running("sched-remove-active").await;
    let (q, gate) = (&ticking.queue, &ticking.gate);
    assert!(q.remove_scheduler("ticks").await.expect("a removal"));
    gate.release.notify_one();
    wait_until(SOON, "the running job to complete", || async {
        (q.get_job_counts().await.ok()?.completed >= 1).then_some(())
    })
    .await;
    ticking.workers.shutdown(SOON).await;
    let next = next_jobs(q).await;
    assert!(next.is_empty(), "a removed scheduler made a job: {next:?}");
    assert_eq!(q.scheduler_count().await.expect("a count"), 0);
}
