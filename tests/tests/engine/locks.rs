//! The engine changes about job locks (`queue-engine/PATCHES.md`, changes 15, 17 and
//! 18), tested on the engine's own API against a real Redis: expired locks taken back
//! by id and token, a failure Redis refused not reported as one, and a run whose lock
//! was lost leaving the job to its new owner.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use bullmq::options::RedisConnectionOptions;
use bullmq::worker::WorkerEvent;
use bullmq::{JobOptions, LockRetake, Queue, QueueOptions, Worker, WorkerOptions};
use queue_tests::{redis_url, wait_until, TestRedis, SOON};
use tokio::sync::watch;

async fn queue(redis: &TestRedis, name: &str) -> Queue {
    let options = QueueOptions::new()
        .connection(RedisConnectionOptions::new().url(redis_url()))
        .prefix(redis.prefix().to_owned());
    Queue::with_options(name, options).await.unwrap()
}

/// A worker that renews no lock itself, whose processor waits for `go` and then
/// returns what `outcome` makes of the job's id.
async fn worker(
    redis: &TestRedis,
    name: &str,
    concurrency: usize,
    go: watch::Receiver<bool>,
    outcome: fn(&str) -> bullmq::Result<serde_json::Value>,
) -> Worker {
    let processor: bullmq::worker::ProcessorFn = Arc::new(move |job, _cancel| {
        let mut go = go.clone();
        let id = job.id().to_owned();
        Box::pin(async move {
            let _ = go.wait_for(|go| *go).await;
            outcome(&id)
        })
    });
    let options = WorkerOptions {
        connection: RedisConnectionOptions::new().url(redis_url()),
        prefix: redis.prefix().to_owned(),
        drain_delay: 1,
        concurrency,
        skip_lock_renewal: true,
        ..Default::default()
    };
    Worker::with_options(name, processor, options)
        .await
        .unwrap()
}

async fn connection() -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn lock_of(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query_async(conn).await.unwrap()
}

/// Every event the worker has sent so far (a handful: well under tokio's budget).
fn events(worker: &Worker) -> Vec<WorkerEvent> {
    let mut seen = Vec::new();
    while let Some(Some(event)) = worker.next_event().now_or_never() {
        seen.push(event);
    }
    seen
}

#[tokio::test]
async fn retake_locks_takes_back_an_expired_lock_and_names_the_others() {
    let redis = TestRedis::new("patch-retake");
    let q = queue(&redis, "retake").await;
    for id in ["held", "expired", "taken"] {
        q.add("x", serde_json::json!({}))
            .options(JobOptions::new().job_id(id))
            .await
            .unwrap();
    }
    let (release, go) = watch::channel(false);
    let worker = worker(&redis, "retake", 3, go, |_| Ok(serde_json::Value::Null)).await;
    let lock_key = |id: &str| format!("{}:retake:{id}:lock", redis.prefix());
    let mut conn = connection().await;
    let mut tokens = Vec::new();
    for id in ["held", "expired", "taken"] {
        let key = lock_key(id);
        let token = wait_until(SOON, "the jobs to be locked", || {
            let mut conn = conn.clone();
            let key = key.clone();
            async move { lock_of(&mut conn, &key).await }
        })
        .await;
        tokens.push(token);
    }
    // One lock expired (nobody renewed it), another run took the third job.
    redis::cmd("DEL")
        .arg(lock_key("expired"))
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
    redis::cmd("SET")
        .arg(lock_key("taken"))
        .arg("another-run")
        .query_async::<()>(&mut conn)
        .await
        .unwrap();

    let outcomes = q
        .retake_locks(
            &[
                ("held", &tokens[0]),
                ("expired", &tokens[1]),
                ("taken", &tokens[2]),
                ("never-added", "a-token"),
            ],
            60_000,
        )
        .await
        .unwrap();
    assert_eq!(
        outcomes,
        [
            LockRetake::Held,
            LockRetake::Retaken,
            LockRetake::Taken,
            LockRetake::Gone
        ]
    );
    assert_eq!(
        lock_of(&mut conn, &lock_key("expired")).await.as_ref(),
        Some(&tokens[1])
    );
    let ttl: i64 = redis::cmd("PTTL")
        .arg(lock_key("expired"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(ttl > 30_000, "taken back for a minute: {ttl} ms");
    assert_eq!(
        lock_of(&mut conn, &lock_key("taken")).await.as_deref(),
        Some("another-run"),
        "another run's lock is left alone"
    );
    assert!(q.retake_locks(&[], 1000).await.unwrap().is_empty());

    release.send(true).unwrap();
    worker.close(5000).await.unwrap();
}

/// The attempt failed, but another run holds the job now: its retry is refused ("lock
/// mismatch"). Nothing was recorded, so no `Failed` is reported (Node.js emits
/// `failed` only after `moveToFailed` succeeds); the refusal is an `Error`.
#[tokio::test]
async fn a_failure_redis_refused_is_not_reported_as_failed() {
    let redis = TestRedis::new("patch-refused");
    let q = queue(&redis, "refused").await;
    q.add("x", serde_json::json!({}))
        .options(JobOptions::new().job_id("r-1").attempts(3))
        .await
        .unwrap();
    let (release, go) = watch::channel(false);
    let worker = worker(&redis, "refused", 1, go, |_| {
        Err(bullmq::Error::ProcessingError("smtp down".into()))
    })
    .await;
    let lock_key = format!("{}:refused:r-1:lock", redis.prefix());
    let mut conn = connection().await;
    wait_until(SOON, "the job to be locked", || {
        let mut conn = conn.clone();
        let key = lock_key.clone();
        async move { lock_of(&mut conn, &key).await }
    })
    .await;
    redis::cmd("SET")
        .arg(&lock_key)
        .arg("another-run")
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
    release.send(true).unwrap();
    wait_until(SOON, "the attempt to be over", || async {
        (worker.active_count().await == 0).then_some(())
    })
    .await;

    let seen = events(&worker);
    assert!(
        seen.iter().any(|e| matches!(e, WorkerEvent::Error(_))),
        "the refusal is reported as an error: {seen:?}"
    );
    assert!(
        !seen.iter().any(|e| matches!(e, WorkerEvent::Failed { .. })),
        "no failure was recorded, none is reported: {seen:?}"
    );
    assert_eq!(
        q.get_job_state("r-1").await.unwrap(),
        bullmq::JobState::Active
    );
    worker.close(5000).await.unwrap();
}

/// The processor learned that its lock is lost (`Error::JobLockNotExist`): the engine
/// leaves the job to the run that holds it, without trying to move it, and reports
/// neither a failure nor an error.
#[tokio::test]
async fn a_processor_whose_lock_was_lost_leaves_the_job_to_its_new_owner() {
    let redis = TestRedis::new("patch-lock-lost");
    let q = queue(&redis, "lost").await;
    q.add("x", serde_json::json!({}))
        .options(JobOptions::new().job_id("l-1").attempts(3))
        .await
        .unwrap();
    let (release, go) = watch::channel(false);
    let worker = worker(&redis, "lost", 1, go, |id| {
        Err(bullmq::Error::JobLockNotExist(id.to_owned()))
    })
    .await;
    let lock_key = format!("{}:lost:l-1:lock", redis.prefix());
    let mut conn = connection().await;
    wait_until(SOON, "the job to be locked", || {
        let mut conn = conn.clone();
        let key = lock_key.clone();
        async move { lock_of(&mut conn, &key).await }
    })
    .await;
    redis::cmd("SET")
        .arg(&lock_key)
        .arg("another-run")
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
    release.send(true).unwrap();
    wait_until(SOON, "the attempt to be over", || async {
        (worker.active_count().await == 0).then_some(())
    })
    .await;

    let seen = events(&worker);
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, WorkerEvent::Failed { .. } | WorkerEvent::Error(_))),
        "{seen:?}"
    );
    assert_eq!(
        q.get_job_state("l-1").await.unwrap(),
        bullmq::JobState::Active
    );
    assert_eq!(
        lock_of(&mut conn, &lock_key).await.as_deref(),
        Some("another-run")
    );
    let job = q.get_job("l-1").await.unwrap().unwrap();
    assert_eq!(job.attempts_made(), 0, "no attempt spent");
    worker
        .close(Duration::from_secs(5).as_millis() as u64)
        .await
        .unwrap();
}
