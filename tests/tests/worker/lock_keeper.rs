//! Job locks at their edges (issue 27, items 10 and 11): a lock another run took is
//! `LockLost`, never a failure of the job; a renewal pass that fails is tried again
//! before the lock runs out; a lock that merely expired while Redis was away is taken
//! back, and the run goes on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use queue_core::metrics::Metrics;
use queue_core::{
    app::Registrations, Job, JobError, JobOptions, JobState, Processor, QueueApp, WorkerEvent,
};
use queue_tests::{wait_for_state, wait_until, PrivateRedis, TestRedis, SOON};

/// Every event about `job_id` already published, without waiting for more.
fn events_about(events: &mut queue_core::events::WorkerEvents, job_id: &str) -> Vec<WorkerEvent> {
    let mut seen = Vec::new();
    while let Some(Some(event)) = events.recv().now_or_never() {
        if event.job_id() == Some(job_id) {
            seen.push(event);
        }
    }
    seen
}

static LOST_RUN_ENDED: AtomicBool = AtomicBool::new(false);

/// Runs until cancelled, then stops with an error, as a handler that watches its
/// cancel signal does.
async fn stops_when_cancelled(job: Job<u32>) -> Result<(), JobError> {
    tokio::select! {
        () = job.cancelled() => {
            LOST_RUN_ENDED.store(true, Ordering::SeqCst);
            Err(JobError::retry(std::io::Error::other("stopped: cancelled")))
        }
        () = tokio::time::sleep(Duration::from_secs(20)) => Ok(()),
    }
}

/// Another run holds the job now (a worker that recovered it as stalled): this run is
/// cancelled and reported as `LockLost`. The job did not fail: it runs elsewhere, with
/// attempts left, so no listener may hear `Failed` (let alone `is_final: true`, a false
/// dead-letter alert), and no metric counts a failure.
#[tokio::test]
async fn a_lost_lock_is_reported_as_lock_lost_never_as_a_failure() {
    let redis = TestRedis::new("locks-lost");
    let metrics = Metrics::new();
    let app = redis
        .app(|b| {
            b.metrics(metrics.clone()).processor(
                Processor::new("lost")
                    .lock_duration(Duration::from_secs(1))
                    .job("run", stops_when_cancelled),
            )
        })
        .await;
    let mut events = app.worker_events();
    let workers = app.start_workers().await.unwrap();
    let queue = app.queue::<u32>("lost").unwrap();
    queue
        .add("run", 0, JobOptions::new().job_id("lost-1").attempts(5))
        .await
        .unwrap();
    wait_for_state(&queue, "lost-1", JobState::Active, SOON).await;

    let mut conn = queue_tests::sync_connection();
    let lock_key = format!("{}:lost:lost-1:lock", redis.prefix());
    redis::cmd("SET")
        .arg(&lock_key)
        .arg("another-run")
        .arg("PX")
        .arg(30_000)
        .query::<()>(&mut *conn)
        .unwrap();
    wait_until(SOON, "the run to see its cancellation", || async {
        LOST_RUN_ENDED.load(Ordering::SeqCst).then_some(())
    })
    .await;
    // Once the workers have stopped, the engine is done with the attempt and every
    // event about it has been published.
    assert!(workers.shutdown(SOON).await.is_clean());

    let seen = events_about(&mut events, "lost-1");
    assert!(
        seen.iter()
            .any(|e| matches!(e, WorkerEvent::LockLost { .. })),
        "LockLost reported: {seen:#?}"
    );
    assert!(
        !seen.iter().any(|e| matches!(e, WorkerEvent::Failed { .. })),
        "a lost lock is not a failure: {seen:#?}"
    );
    // The job is the other run's: still active under its lock, no attempt spent.
    assert_eq!(
        queue.get_job_state("lost-1").await.unwrap(),
        Some(JobState::Active)
    );
    let holder: String = redis::cmd("GET").arg(&lock_key).query(&mut *conn).unwrap();
    assert_eq!(holder, "another-run");
    assert_eq!(
        queue
            .get_job("lost-1")
            .await
            .unwrap()
            .unwrap()
            .attempts_made,
        0
    );
    let scraped = metrics.render(&app).await.unwrap();
    for counter in ["queue_jobs_failed_total", "queue_jobs_retried_total"] {
        assert!(
            !scraped
                .lines()
                .any(|l| l.starts_with(counter) && l.contains(r#"queue="lost""#)),
            "{counter} counts nothing for a lost lock:\n{scraped}"
        );
    }
    assert!(
        scraped.contains(r#"queue_jobs_lock_lost_total{queue="lost",name="run"} 1"#),
        "the lost lock is counted as such:\n{scraped}"
    );
}

static RELEASE_RENEWED: AtomicBool = AtomicBool::new(false);
static RELEASE_RETAKEN: AtomicBool = AtomicBool::new(false);

/// Runs until `release` is set (a minute at most), watching for a cancellation.
async fn runs_until(job: &Job<u32>, release: &AtomicBool) -> Result<&'static str, JobError> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !release.load(Ordering::SeqCst) && Instant::now() < deadline {
        if job.is_cancelled() {
            return Err(JobError::retry(std::io::Error::other("cancelled")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok("finished by its first run")
}

async fn runs_until_renewed(job: Job<u32>) -> Result<&'static str, JobError> {
    runs_until(&job, &RELEASE_RENEWED).await
}

async fn runs_until_retaken(job: Job<u32>) -> Result<&'static str, JobError> {
    runs_until(&job, &RELEASE_RETAKEN).await
}

/// An app on a private Redis (the tests below make it fail or die).
async fn private_app(redis: &PrivateRedis, processor: Processor) -> QueueApp {
    QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .registrations(Registrations::None)
        .processor(processor)
        .build()
        .await
        .unwrap()
}

fn admin(redis: &PrivateRedis) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{}", redis.port()))
        .and_then(|c| c.get_connection())
        .expect("an admin connection")
}

/// The lock's remaining time in ms (`-2` when there is no lock).
fn pttl(conn: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(conn).unwrap_or(-2)
}

/// One renewal pass fails (here Redis refuses scripts for a while, as it would answer
/// errors during a failover): the keeper tries again at once instead of waiting for
/// its next regular pass, so the lock is renewed long before it runs out.
#[tokio::test]
async fn a_failed_renewal_pass_is_retried_before_the_lock_runs_out() {
    const LOCK: Duration = Duration::from_secs(4);
    let redis = PrivateRedis::start();
    let app = private_app(
        &redis,
        Processor::new("renew")
            .lock_duration(LOCK)
            .job("run", runs_until_renewed),
    )
    .await;
    let mut events = app.worker_events();
    let workers = app.start_workers().await.unwrap();
    let queue = app.queue::<u32>("renew").unwrap();
    queue
        .add("run", 0, JobOptions::new().job_id("renew-1"))
        .await
        .unwrap();
    wait_for_state(&queue, "renew-1", JobState::Active, SOON).await;
    let mut conn = admin(&redis);
    let lock_key = "bull:renew:renew-1:lock";
    let token: String = redis::cmd("GET").arg(lock_key).query(&mut conn).unwrap();

    // Catch a renewal as it happens: the lock's time to live jumps back up.
    let mut last = pttl(&mut conn, lock_key);
    let renewed_at = wait_until(SOON, "a renewal", || {
        let now = pttl(&mut conn, lock_key);
        let jumped = now > last + 300;
        last = now;
        std::future::ready(jumped.then(Instant::now))
    })
    .await;
    // Every renewal fails for 60 % of the lock from now: Redis refuses scripts.
    let acl = |conn: &mut redis::Connection, rules: &[&str]| {
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg("default")
            .arg(rules)
            .query::<()>(conn)
            .unwrap();
    };
    acl(&mut conn, &["-evalsha", "-eval"]);
    tokio::time::sleep_until((renewed_at + LOCK * 3 / 5).into()).await;
    acl(&mut conn, &["+evalsha", "+eval"]);

    // Renewed again soon after Redis answers, well before the lock would run out
    // (`LOCK` after the last renewal), not at some later regular pass.
    let mut last = pttl(&mut conn, lock_key);
    wait_until(LOCK, "the lock to be renewed again", || {
        let now = pttl(&mut conn, lock_key);
        let jumped = now > last + 300;
        last = now;
        std::future::ready(jumped.then_some(()))
    })
    .await;
    // Without retries, the next regular pass (half a lock after the failed one) came
    // as the lock ran out, or after: too late.
    let again_after = renewed_at.elapsed();
    println!(
        "renewed again {again_after:?} after the last renewal (scripts refused for {:?})",
        LOCK * 3 / 5
    );
    assert!(
        again_after < LOCK * 19 / 20,
        "renewed {again_after:?} after the last renewal: too close to the lock's {LOCK:?}"
    );
    let holder: String = redis::cmd("GET").arg(lock_key).query(&mut conn).unwrap();
    assert_eq!(holder, token, "still this run's lock");

    RELEASE_RENEWED.store(true, Ordering::SeqCst);
    wait_for_state(&queue, "renew-1", JobState::Completed, SOON).await;
    assert!(workers.shutdown(SOON).await.is_clean());
    let seen = events_about(&mut events, "renew-1");
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, WorkerEvent::LockLost { .. })),
        "{seen:#?}"
    );
}

/// Redis is away for longer than the lock, then comes back with its data: the lock
/// expired meanwhile, but no other worker took the job (it is still active, nobody
/// holds its lock). The keeper takes the lock back; the run is not cancelled, and the
/// job completes from its first run, without a stall or a second run.
#[tokio::test]
async fn a_lock_that_expired_in_an_outage_is_taken_back_and_the_run_goes_on() {
    const LOCK: Duration = Duration::from_secs(2);
    let mut redis = PrivateRedis::start_persistent();
    let app = private_app(
        &redis,
        Processor::new("retake")
            .lock_duration(LOCK)
            .job("run", runs_until_retaken),
    )
    .await;
    let mut events = app.worker_events();
    let workers = app.start_workers().await.unwrap();
    let queue = app.queue::<u32>("retake").unwrap();
    queue
        .add("run", 0, JobOptions::new().job_id("retake-1").attempts(3))
        .await
        .unwrap();
    wait_for_state(&queue, "retake-1", JobState::Active, SOON).await;
    let lock_key = "bull:retake:retake-1:lock";
    let token: String = redis::cmd("GET")
        .arg(lock_key)
        .query(&mut admin(&redis))
        .unwrap();

    // The outage: longer than the lock, which expires meanwhile.
    redis.kill();
    tokio::time::sleep(LOCK + Duration::from_secs(1)).await;
    redis.restart();

    let mut conn = admin(&redis);
    wait_until(SOON, "the lock to be taken back by the same run", || {
        // A Redis still loading its data answers BusyLoading: not yet.
        let holder: Option<String> = redis::cmd("GET")
            .arg(lock_key)
            .query(&mut conn)
            .unwrap_or(None);
        std::future::ready((holder.as_deref() == Some(token.as_str())).then_some(()))
    })
    .await;
    RELEASE_RETAKEN.store(true, Ordering::SeqCst);
    // The app's own connection may answer its first command after the outage with
    // the error of the connection that died.
    wait_until(SOON, "the job to complete", || async {
        let state = queue.get_job_state("retake-1").await.ok()?;
        (state == Some(JobState::Completed)).then_some(())
    })
    .await;
    let info = queue.get_job("retake-1").await.unwrap().unwrap();
    assert_eq!(
        info.return_value,
        Some(serde_json::json!("finished by its first run"))
    );
    assert_eq!(info.attempts_started, 1, "one run, no stall");
    assert!(workers.shutdown(SOON).await.is_clean());
    let seen = events_about(&mut events, "retake-1");
    assert!(
        !seen.iter().any(|e| matches!(
            e,
            WorkerEvent::LockLost { .. } | WorkerEvent::Stalled { .. } | WorkerEvent::Failed { .. }
        )),
        "{seen:#?}"
    );
}

static RELEASE_BUSY: AtomicBool = AtomicBool::new(false);

async fn runs_until_released(job: Job<u32>) -> Result<&'static str, JobError> {
    runs_until(&job, &RELEASE_BUSY).await
}

/// Every slot busy with a job longer than the lock, and a job waiting: the worker is
/// busy, not wedged, as long as the keeper renews its locks, and the liveness probe
/// must say so (the keeper tells the worker's pulse of each renewal).
#[tokio::test]
async fn a_busy_worker_whose_locks_are_renewed_stays_live() {
    const LOCK: Duration = Duration::from_secs(1);
    let redis = TestRedis::new("locks-live");
    let app = redis
        .app(|b| {
            b.processor(
                Processor::new("busy")
                    .lock_duration(LOCK)
                    .job("run", runs_until_released),
            )
        })
        .await;
    let health = app.health(queue_core::health::HealthSettings::new().wedged_after(LOCK));
    let workers = app.start_workers().await.unwrap();
    let queue = app.queue::<u32>("busy").unwrap();
    for id in ["busy-1", "busy-2"] {
        queue
            .add("run", 0, JobOptions::new().job_id(id))
            .await
            .unwrap();
    }
    wait_for_state(&queue, "busy-1", JobState::Active, SOON).await;
    // Watched for three locks' time: past the probe's period and the lock, a worker
    // with no sign of life would be taken for wedged (a job waits, no slot is free).
    let watched = Instant::now();
    while watched.elapsed() < LOCK * 3 {
        let report = health.live().await;
        assert!(
            report.is_healthy(),
            "{:?} into the job: {report:?}",
            watched.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    RELEASE_BUSY.store(true, Ordering::SeqCst);
    wait_for_state(&queue, "busy-2", JobState::Completed, SOON).await;
    assert!(workers.shutdown(SOON).await.is_clean());
}
