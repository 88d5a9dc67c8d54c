//! Lifecycle and management: graceful shutdown, workers for a subset of queues,
//! cancellation across processes, and the queue management calls.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use queue_core::{
    queue::CancelOutcome, Error, Job, JobError, JobOptions, JobState, Processor, QueueApp,
};
use queue_tests::{wait_for_state, wait_until, TestRedis, SOON};

async fn slow(job: Job<u64>) -> Result<u64, JobError> {
    tokio::time::sleep(Duration::from_millis(job.data)).await;
    Ok(job.data)
}

/// Waits for the cancellation signal and reports that it stopped.
async fn export(job: Job<()>) -> Result<(), JobError> {
    job.log("export started").await?;
    tokio::select! {
        () = job.cancelled() => {
            job.log("export stopped by request").await?;
            Err(JobError::retry(std::io::Error::other("stopped")))
        }
        () = tokio::time::sleep(Duration::from_secs(30)) => Ok(()),
    }
}

static IGNORED_CANCEL: AtomicBool = AtomicBool::new(false);

/// Never looks at the cancellation signal.
async fn stubborn(_job: Job<()>) -> Result<(), JobError> {
    tokio::time::sleep(Duration::from_secs(30)).await;
    IGNORED_CANCEL.store(true, Ordering::SeqCst);
    Ok(())
}

#[tokio::test]
async fn shutdown_waits_for_the_active_job_and_leaves_nothing_active() {
    let redis = TestRedis::new("shutdown");
    let app = redis
        .app(|b| b.processor(Processor::new("slow").any_job(slow)))
        .await;
    let q = app.queue::<u64>("slow").unwrap();
    let workers = app.start_workers().await.unwrap();
    q.add("s", 700, JobOptions::new().job_id("slow-1"))
        .await
        .unwrap();
    wait_for_state(&q, "slow-1", JobState::Active, SOON).await;

    let report = workers.shutdown(SOON).await;
    assert!(report.is_clean());
    assert_eq!(
        q.get_job_state("slow-1").await.unwrap(),
        Some(JobState::Completed)
    );
    assert_eq!(q.get_job_counts().await.unwrap().active, 0);

    // After shutdown nothing is fetched any more.
    q.add("s", 1, JobOptions::new().job_id("after-1"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        q.get_job_state("after-1").await.unwrap(),
        Some(JobState::Waiting)
    );
}

#[tokio::test]
async fn a_missed_deadline_is_reported() {
    let redis = TestRedis::new("deadline");
    let app = redis
        .app(|b| b.processor(Processor::new("slow").any_job(slow)))
        .await;
    let q = app.queue::<u64>("slow").unwrap();
    let workers = app.start_workers().await.unwrap();
    q.add("s", 5_000, JobOptions::new().job_id("slow-1"))
        .await
        .unwrap();
    wait_for_state(&q, "slow-1", JobState::Active, SOON).await;
    let report = workers.shutdown(Duration::from_millis(200)).await;
    assert_eq!(report.still_active, 1);
}

#[tokio::test]
async fn workers_can_start_for_a_subset_of_queues() {
    let redis = TestRedis::new("subset");
    let app = redis
        .app(|b| {
            b.processor(Processor::new("a").any_job(slow))
                .processor(Processor::new("b").any_job(slow))
        })
        .await;
    assert_eq!(app.processor_queues(), ["a", "b"]);
    let workers = app.start_workers_for(&["b"]).await.unwrap();
    assert_eq!(workers.queues(), ["b"]);
    let (a, b) = (
        app.queue::<u64>("a").unwrap(),
        app.queue::<u64>("b").unwrap(),
    );
    a.add("s", 1, JobOptions::new().job_id("a-1"))
        .await
        .unwrap();
    b.add("s", 1, JobOptions::new().job_id("b-1"))
        .await
        .unwrap();
    wait_for_state(&b, "b-1", JobState::Completed, SOON).await;
    assert_eq!(
        a.get_job_state("a-1").await.unwrap(),
        Some(JobState::Waiting)
    );
    workers.shutdown(SOON).await;

    let err = app.start_workers_for(&["emial"]).await.unwrap_err();
    assert!(matches!(
        err,
        Error::InvalidOption {
            option: "queues",
            ..
        }
    ));
    assert!(
        err.to_string().contains("`emial`; registered: a, b"),
        "{err}"
    );
}

#[tokio::test]
async fn cancelling_a_waiting_job_removes_it() {
    let redis = TestRedis::new("cancel-wait");
    let app = redis.app(|b| b).await;
    let q = app.queue::<()>("exports").unwrap();
    q.add("export", (), JobOptions::new().job_id("export-1"))
        .await
        .unwrap();
    q.add(
        "export",
        (),
        JobOptions::new()
            .job_id("export-2")
            .delay(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    assert_eq!(q.cancel("export-1").await.unwrap(), CancelOutcome::Removed);
    assert_eq!(q.cancel("export-2").await.unwrap(), CancelOutcome::Removed);
    assert_eq!(q.cancel("export-1").await.unwrap(), CancelOutcome::NotFound);
    assert_eq!(q.get_job_counts().await.unwrap().unfinished(), 0);
}

#[tokio::test]
async fn cancelling_an_active_job_from_another_process_stops_it_without_retries() {
    let redis = TestRedis::new("cancel-active");
    let worker_app = redis
        .app(|b| {
            b.processor(
                Processor::new("exports")
                    .concurrency(2)
                    .cancel_grace(Duration::from_millis(300))
                    .job("export", export)
                    .job("stubborn", stubborn),
            )
        })
        .await;
    let workers = worker_app.start_workers().await.unwrap();
    // A second app: its own connection, as another process would have.
    let web_app = redis.app(|b| b).await;
    let q = web_app.queue::<()>("exports").unwrap();
    let retries = JobOptions::new().attempts(3);

    q.add("export", (), retries.clone().job_id("export-1"))
        .await
        .unwrap();
    q.add("stubborn", (), retries.job_id("stubborn-1"))
        .await
        .unwrap();
    wait_for_state(&q, "export-1", JobState::Active, SOON).await;
    wait_for_state(&q, "stubborn-1", JobState::Active, SOON).await;

    // The worker subscribes to cancellations as it starts; wait until it listens.
    let outcome = wait_until(SOON, "a listening worker", || async {
        match q.cancel("export-1").await.unwrap() {
            CancelOutcome::Signalled { listeners: 0 } => None,
            other => Some(other),
        }
    })
    .await;
    assert_eq!(outcome, CancelOutcome::Signalled { listeners: 1 });
    assert!(matches!(
        q.cancel("stubborn-1").await.unwrap(),
        CancelOutcome::Signalled { listeners: 1 }
    ));

    wait_for_state(&q, "export-1", JobState::Failed, SOON).await;
    let info = q.get_job("export-1").await.unwrap().unwrap();
    assert_eq!(info.failed_reason.as_deref(), Some("cancelled: stopped"));
    assert_eq!(info.attempts_made, 1, "a cancelled job is not retried");
    let logs = q.get_job_logs("export-1", 0..10).await.unwrap().lines;
    assert_eq!(logs, ["export started", "export stopped by request"]);

    wait_for_state(&q, "stubborn-1", JobState::Failed, SOON).await;
    let stubborn = q.get_job("stubborn-1").await.unwrap().unwrap();
    assert_eq!(
        stubborn.failed_reason.as_deref(),
        Some("cancelled: the handler did not stop within 300ms of the request")
    );
    assert!(
        !IGNORED_CANCEL.load(Ordering::SeqCst),
        "the ignored handler's future was dropped"
    );
    assert!(matches!(
        q.cancel("export-1").await.unwrap(),
        CancelOutcome::AlreadyFinished(JobState::Failed)
    ));
    workers.shutdown(SOON).await;
}

/// The `bad-` jobs that have failed once (a retry by hand counts attempts afresh, so
/// `attempts_made` cannot tell).
static FAILED_ONCE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

async fn fail_once(job: Job<()>) -> Result<(), JobError> {
    let first = {
        let mut failed = FAILED_ONCE.lock().unwrap();
        let first = !failed.iter().any(|id| id == job.id());
        failed.push(job.id().to_owned());
        first
    };
    if first && job.id().starts_with("bad-") {
        return Err(JobError::unrecoverable(std::io::Error::other(
            "first run fails",
        )));
    }
    Ok(())
}

#[tokio::test]
async fn management_calls_move_jobs_between_states() {
    let redis = TestRedis::new("manage");
    let app: QueueApp = redis
        .app(|b| b.processor(Processor::new("m").concurrency(2).any_job(fail_once)))
        .await;
    let q = app.queue::<()>("m").unwrap();
    let workers = app.start_workers().await.unwrap();

    q.add("x", (), JobOptions::new().job_id("bad-1"))
        .await
        .unwrap();
    q.add("x", (), JobOptions::new().job_id("bad-2"))
        .await
        .unwrap();
    q.add("x", (), JobOptions::new().job_id("ok-1"))
        .await
        .unwrap();
    wait_for_state(&q, "bad-1", JobState::Failed, SOON).await;
    wait_for_state(&q, "bad-2", JobState::Failed, SOON).await;
    wait_for_state(&q, "ok-1", JobState::Completed, SOON).await;
    let counts = q.get_job_counts().await.unwrap();
    assert_eq!((counts.failed, counts.completed), (2, 1));
    let failed = q.get_jobs(&[JobState::Failed], 0..10).await.unwrap();
    assert_eq!(failed.len(), 2);

    // retry one, then the rest
    let err = q.retry("ok-1").await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::WrongState {
                operation: "retry",
                ..
            }
        ),
        "{err:?}"
    );
    q.retry("bad-1").await.unwrap();
    wait_for_state(&q, "bad-1", JobState::Completed, SOON).await;
    q.retry_failed().await.unwrap();
    wait_for_state(&q, "bad-2", JobState::Completed, SOON).await;

    // promote a delayed job
    q.add(
        "x",
        (),
        JobOptions::new()
            .job_id("later-1")
            .delay(Duration::from_secs(3600)),
    )
    .await
    .unwrap();
    q.promote("later-1").await.unwrap();
    wait_for_state(&q, "later-1", JobState::Completed, SOON).await;
    assert!(matches!(
        q.promote("missing-1").await,
        Err(Error::JobNotFound { .. })
    ));

    // clean finished jobs
    let cleaned = q
        .clean(Duration::ZERO, 0, JobState::Completed)
        .await
        .unwrap();
    assert_eq!(cleaned.len(), 4);
    assert_eq!(q.get_job_counts().await.unwrap().completed, 0);
    workers.shutdown(SOON).await;

    // drain waiting (and delayed) jobs
    q.add("x", (), JobOptions::new().job_id("w-1"))
        .await
        .unwrap();
    q.add(
        "x",
        (),
        JobOptions::new()
            .job_id("d-1")
            .delay(Duration::from_secs(3600)),
    )
    .await
    .unwrap();
    q.drain(false).await.unwrap();
    let counts = q.get_job_counts().await.unwrap();
    assert_eq!((counts.waiting, counts.delayed), (0, 1));
    q.drain(true).await.unwrap();
    assert_eq!(q.get_job_counts().await.unwrap().delayed, 0);

    // obliterate removes every key of the queue
    q.add("x", (), JobOptions::new().job_id("w-2"))
        .await
        .unwrap();
    q.obliterate(false).await.unwrap();
    assert!(
        redis.keys().iter().all(|k| !k.contains(":m:")),
        "{:?}",
        redis.keys()
    );
}

#[tokio::test]
async fn a_scheduler_adds_its_job_on_schedule_and_upserting_again_keeps_one() {
    let redis = TestRedis::new("scheduler");
    let app = redis
        .app(|b| b.processor(Processor::new("ticks").any_job(slow)))
        .await;
    let q = app.queue::<u64>("ticks").unwrap();
    let every = queue_core::options::Schedule::every(Duration::from_millis(300));
    for _ in 0..3 {
        // a restart, or three replicas starting at once
        q.upsert_scheduler("tick", every.clone(), "tick", 1, JobOptions::new())
            .await
            .unwrap();
    }
    assert_eq!(q.scheduler_count().await.unwrap(), 1);
    let counts = q.get_job_counts().await.unwrap();
    assert_eq!(
        counts.delayed + counts.waiting,
        1,
        "one next job, not three: {counts:?}"
    );

    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "three scheduled runs", || async {
        (q.get_job_counts().await.unwrap().completed >= 3).then_some(())
    })
    .await;
    workers.shutdown(SOON).await;
    assert!(q.remove_scheduler("tick").await.unwrap());
    assert_eq!(q.scheduler_count().await.unwrap(), 0);

    // The per-job timeout travels with the scheduler's template into every job it
    // makes: each run of 10 s is cut at 50 ms.
    q.upsert_scheduler(
        "bounded",
        queue_core::options::Schedule::every(Duration::from_millis(100)),
        "tick",
        10_000,
        JobOptions::new().timeout(Duration::from_millis(50)),
    )
    .await
    .unwrap();
    let workers = app.start_workers().await.unwrap();
    let failed = wait_until(SOON, "two scheduled runs cut by their timeout", || async {
        let failed = q.get_jobs(&[JobState::Failed], 0..100).await.unwrap();
        (failed.len() >= 2).then_some(failed)
    })
    .await;
    for job in failed {
        let reason = job.failed_reason.unwrap_or_default();
        assert!(reason.contains("timed out after 50ms"), "{reason}");
    }
    workers.shutdown(SOON).await;
    assert!(q.remove_scheduler("bounded").await.unwrap());
}

#[tokio::test]
async fn workers_started_when_ready_fetch_nothing_before_the_app_says_so() {
    let redis = TestRedis::new("ready");
    let app = redis
        .app(|b| b.processor(Processor::new("ready").any_job(slow)))
        .await;
    let queue = app.queue::<u64>("ready").unwrap();
    let (ready, is_ready) = tokio::sync::oneshot::channel::<()>();
    let mut workers = app
        .start_workers_when(async move {
            let _ = is_ready.await;
        })
        .await
        .unwrap();
    assert_eq!(workers.queues(), ["ready"]);
    let added = queue.add("sleep", 1, JobOptions::new()).await.unwrap();
    // No worker is connected to the queue: nothing can take the job.
    assert!(queue.get_workers().await.unwrap().is_empty());
    assert_eq!(
        queue.get_job_state(&added.id).await.unwrap(),
        Some(JobState::Waiting)
    );

    ready.send(()).unwrap();
    workers.started().await.unwrap();
    wait_for_state(&queue, &added.id, JobState::Completed, SOON).await;
    if queue_tests::cluster_nodes().is_none() {
        // (A cluster answers `CLIENT LIST` for one node.)
        assert_eq!(queue.get_workers().await.unwrap().len(), 1);
    }
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn a_shutdown_before_the_app_is_ready_starts_nothing() {
    let redis = TestRedis::new("ready-never");
    let app = redis
        .app(|b| b.processor(Processor::new("ready-never").any_job(slow)))
        .await;
    let queue = app.queue::<u64>("ready-never").unwrap();
    let added = queue.add("sleep", 1, JobOptions::new()).await.unwrap();
    let workers = app
        .start_workers_when(std::future::pending())
        .await
        .unwrap();
    assert!(workers.shutdown(SOON).await.is_clean());
    assert!(queue.get_workers().await.unwrap().is_empty());
    assert_eq!(
        queue.get_job_state(&added.id).await.unwrap(),
        Some(JobState::Waiting)
    );
}

/// Holds its job until the test lets it go, then adds a follow-up through the app.
async fn follow_up(job: Job<()>, app: queue_core::Dep<QueueApp>) -> Result<String, JobError> {
    let gate = GATE.get().expect("gate set").clone();
    gate.notified().await;
    let added = app
        .queue::<()>("follow-ups")
        .map_err(JobError::retry)?
        .add(
            "after",
            (),
            JobOptions::new().job_id(format!("after-{}", job.id())),
        )
        .await
        .map_err(JobError::retry)?;
    Ok(added.id)
}

static GATE: std::sync::OnceLock<std::sync::Arc<tokio::sync::Notify>> = std::sync::OnceLock::new();

#[tokio::test]
async fn the_app_shuts_down_workers_before_what_their_jobs_use() {
    let redis = TestRedis::new("shutdown-order");
    let gate = GATE
        .get_or_init(|| std::sync::Arc::new(tokio::sync::Notify::new()))
        .clone();
    let app = redis
        .app(|b| b.processor(Processor::new("holding").any_job(follow_up)))
        .await;
    let queue = app.queue::<()>("holding").unwrap();
    let workers = app.start_workers().await.unwrap();
    let added = queue
        .add("hold", (), JobOptions::new().job_id("held"))
        .await
        .unwrap();
    wait_for_state(&queue, &added.id, JobState::Active, SOON).await;
    // The job is let go only once the shutdown is under way.
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        gate.notify_one();
    });
    let report = app.shutdown(workers, SOON).await;
    release.await.unwrap();
    assert!(report.is_clean());
    let done = queue.get_job("held").await.unwrap().unwrap();
    assert_eq!(done.return_value, Some(serde_json::json!("after-held")));
    let follow_ups = app.queue::<()>("follow-ups").unwrap();
    assert_eq!(
        follow_ups.get_job_state("after-held").await.unwrap(),
        Some(JobState::Waiting)
    );
}
