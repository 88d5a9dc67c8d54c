//! The worker wrapper's promises at their edges: a panic anywhere in an attempt is a
//! failed attempt, and a handler that finishes as its deadline passes keeps its result.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use queue_core::prelude::*;
use queue_tests::{wait_for_state, TestRedis, SOON};
use serde::de::Deserializer;

/// A payload whose `Deserialize` panics on the value 13.
#[derive(Debug, Serialize)]
struct Touchy(u32);

impl<'de> Deserialize<'de> for Touchy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u32::deserialize(d)?;
        if n == 13 {
            panic!("the payload's Deserialize panicked on 13");
        }
        Ok(Touchy(n))
    }
}

async fn touchy(_job: Job<Touchy>) -> Result<(), JobError> {
    Ok(())
}

/// A handler that panics before it returns its future.
fn eager(job: Job<u32>) -> impl Future<Output = Result<(), JobError>> {
    if job.data == 13 {
        panic!("the handler panicked before returning its future");
    }
    async { Ok(()) }
}

#[tokio::test]
async fn a_panic_while_deserializing_or_before_the_future_fails_only_that_attempt() {
    let redis = TestRedis::new("holes-panic");
    let app = redis
        .app(|b| {
            b.processor(
                Processor::new("work")
                    .job("touchy", touchy)
                    .job("eager", eager),
            )
        })
        .await;
    let workers = app.start_workers().await.unwrap();
    let raw = app.queue::<serde_json::Value>("work").unwrap();
    for (name, id, value) in [
        ("touchy", "touchy-13", 13),
        ("eager", "eager-13", 13),
        ("touchy", "touchy-1", 1),
        ("eager", "eager-1", 1),
    ] {
        raw.add(
            name,
            serde_json::json!(value),
            JobOptions::new().job_id(id).attempts(2),
        )
        .await
        .unwrap();
    }
    for id in ["touchy-13", "eager-13"] {
        wait_for_state(&raw, id, JobState::Failed, SOON).await;
        let info = raw.get_job(id).await.unwrap().unwrap();
        let reason = info.failed_reason.unwrap_or_default();
        assert!(
            reason.starts_with("handler panicked: the "),
            "{id}: {reason}"
        );
        assert_eq!(
            info.attempts_made, 2,
            "{id}: a panic is a failed, retryable attempt"
        );
    }
    // The worker went on.
    for id in ["touchy-1", "eager-1"] {
        wait_for_state(&raw, id, JobState::Completed, SOON).await;
    }
    assert!(workers.shutdown(SOON).await.is_clean());
}

static RUNS: AtomicUsize = AtomicUsize::new(0);

/// Waits exactly as long as its timeout: its timer and the deadline fire in the same
/// tick, and it finishes (its effect done) in the poll that follows.
async fn overrun(_job: Job<u32>) -> Result<&'static str, JobError> {
    tokio::time::sleep(Duration::from_millis(50)).await;
    RUNS.fetch_add(1, Ordering::SeqCst);
    Ok("done")
}

#[tokio::test]
async fn a_handler_that_finishes_as_the_deadline_passes_keeps_its_result() {
    let redis = TestRedis::new("holes-race");
    let app = redis
        .app(|b| {
            b.processor(
                Processor::new("race")
                    .concurrency(1)
                    .timeout(Duration::from_millis(50))
                    .job("overrun", overrun),
            )
        })
        .await;
    let workers = app.start_workers().await.unwrap();
    let queue = app.queue::<u32>("race").unwrap();
    const JOBS: usize = 12;
    for n in 0..JOBS {
        queue
            .add(
                "overrun",
                0,
                JobOptions::new().job_id(format!("race-{n}")).attempts(3),
            )
            .await
            .unwrap();
    }
    for n in 0..JOBS {
        let id = format!("race-{n}");
        wait_for_state(&queue, &id, JobState::Completed, SOON).await;
        let info = queue.get_job(&id).await.unwrap().unwrap();
        assert_eq!(
            info.attempts_made, 1,
            "{id} was reported timed out and run again"
        );
    }
    assert_eq!(
        RUNS.load(Ordering::SeqCst),
        JOBS,
        "each effect happened once"
    );
    workers.shutdown(SOON).await;
}

async fn welcome(_job: Job<u32>) -> Result<(), JobError> {
    Ok(())
}

async fn farewell(_job: Job<u32>) -> Result<&'static str, JobError> {
    Ok("farewell sent")
}

/// A rolling deploy that updated the producers first: a job named `farewell` reaches
/// an old worker, which knows only `welcome`. Its attempt fails as retryable, naming
/// what the worker knows, and the new worker runs it.
#[tokio::test]
async fn an_unknown_job_name_is_retried_until_a_worker_that_knows_it_runs_it() {
    let redis = TestRedis::new("holes-unknown");
    let old = redis
        .app(|b| b.processor(Processor::new("mail").job("welcome", welcome)))
        .await;
    let old_workers = old.start_workers().await.unwrap();
    let mut events = old.worker_events();
    let queue = old.queue::<u32>("mail").unwrap();
    queue
        .add(
            "farewell",
            1,
            JobOptions::new()
                .job_id("farewell-1")
                .attempts(20)
                .backoff(Backoff::fixed(Duration::from_millis(100))),
        )
        .await
        .unwrap();
    let (reason, is_final) = loop {
        if let Some(WorkerEvent::Failed {
            reason, is_final, ..
        }) = events.recv().await
        {
            break (reason, is_final);
        }
    };
    assert!(
        reason.contains("no handler for job name `farewell`") && reason.contains("welcome"),
        "{reason}"
    );
    assert!(
        !is_final,
        "retryable: a worker that knows it may be deploying"
    );
    old_workers.shutdown(SOON).await;

    let new = redis
        .app(|b| {
            b.processor(
                Processor::new("mail")
                    .job("welcome", welcome)
                    .job("farewell", farewell),
            )
        })
        .await;
    let new_workers = new.start_workers().await.unwrap();
    wait_for_state(&queue, "farewell-1", JobState::Completed, SOON).await;
    let info = queue.get_job("farewell-1").await.unwrap().unwrap();
    assert_eq!(info.return_value, Some(serde_json::json!("farewell sent")));
    new_workers.shutdown(SOON).await;
}

static SAW_CANCEL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Waits to be cancelled (20 s at most) and records that it was.
async fn waits_for_cancel(job: Job<u32>) -> Result<&'static str, JobError> {
    tokio::select! {
        () = job.cancelled() => {
            SAW_CANCEL.store(true, Ordering::SeqCst);
            Ok("cancelled")
        }
        () = tokio::time::sleep(Duration::from_secs(20)) => Ok("never cancelled"),
    }
}

/// Another run takes the job's lock (as a worker that recovered it as stalled would):
/// the renewal finds it lost, cancels this run, and reports it.
#[tokio::test]
async fn a_lost_lock_cancels_the_run_and_is_reported() {
    let redis = TestRedis::new("holes-lock");
    let app = redis
        .app(|b| {
            b.processor(
                Processor::new("locks")
                    .lock_duration(Duration::from_secs(1))
                    .job("wait", waits_for_cancel),
            )
        })
        .await;
    let mut events = app.worker_events();
    let workers = app.start_workers().await.unwrap();
    let queue = app.queue::<u32>("locks").unwrap();
    queue
        .add("wait", 0, JobOptions::new().job_id("locked-1"))
        .await
        .unwrap();
    wait_for_state(&queue, "locked-1", JobState::Active, SOON).await;

    let mut conn = queue_tests::sync_connection();
    let lock_key = format!("{}:locks:locked-1:lock", redis.prefix());
    redis::cmd("SET")
        .arg(&lock_key)
        .arg("another-run")
        .arg("PX")
        .arg(30_000)
        .query::<()>(&mut *conn)
        .unwrap();

    let lost = tokio::time::timeout(SOON, async {
        loop {
            if let Some(WorkerEvent::LockLost { job_id, .. }) = events.recv().await {
                return job_id;
            }
        }
    })
    .await
    .expect("a LockLost event");
    assert_eq!(lost, "locked-1");
    // The run stopped: it was told, and its outcome did not overwrite the other run's
    // hold on the job.
    let still: String = redis::cmd("GET").arg(&lock_key).query(&mut *conn).unwrap();
    assert_eq!(still, "another-run");
    queue_tests::wait_until(SOON, "the handler to see the cancellation", || async {
        SAW_CANCEL.load(Ordering::SeqCst).then_some(())
    })
    .await;
    assert!(
        workers.shutdown(SOON).await.is_clean(),
        "the cancelled run ended"
    );
}

async fn always_fails(_job: Job<u32>) -> Result<(), JobError> {
    Err(JobError::retry(std::io::Error::other("nope")))
}

/// A custom backoff that says stop makes the first failure the last: the engine fails
/// the job then, and the event says so (dead-letter alerts depend on it).
#[tokio::test]
async fn a_custom_backoff_that_says_stop_makes_the_failure_final() {
    let redis = TestRedis::new("holes-final");
    let app = redis
        .app(|b| {
            b.backoff_strategy("give-up", |_ctx| None)
                .processor(Processor::new("final").any_job(always_fails))
        })
        .await;
    let mut events = app.worker_events();
    let workers = app.start_workers().await.unwrap();
    let queue = app.queue::<u32>("final").unwrap();
    queue
        .add(
            "x",
            1,
            JobOptions::new()
                .job_id("give-up-1")
                .attempts(5)
                .backoff(Backoff::custom("give-up")),
        )
        .await
        .unwrap();
    let (attempt, is_final) = loop {
        if let Some(WorkerEvent::Failed {
            attempt, is_final, ..
        }) = events.recv().await
        {
            break (attempt, is_final);
        }
    };
    wait_for_state(&queue, "give-up-1", JobState::Failed, SOON).await;
    assert_eq!(
        queue
            .get_job("give-up-1")
            .await
            .unwrap()
            .unwrap()
            .attempts_made,
        1
    );
    assert_eq!(
        (attempt, is_final),
        (1, true),
        "the engine stopped after the first attempt"
    );
    workers.shutdown(SOON).await;
}

/// Immediate retries on a busy worker: the next attempt starts before the engine's
/// report of the last one arrives. Each report still carries its own attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_failure_report_carries_its_own_attempt_under_fast_retries() {
    let redis = TestRedis::new("holes-fast");
    let app = redis
        .app(|b| b.processor(Processor::new("fast").concurrency(10).any_job(always_fails)))
        .await;
    let mut events = app.worker_events();
    let workers = app.start_workers().await.unwrap();
    let queue = app.queue::<u32>("fast").unwrap();
    const JOBS: usize = 20;
    for n in 0..JOBS {
        queue
            .add(
                "x",
                1,
                JobOptions::new().job_id(format!("fast-{n}")).attempts(3),
            )
            .await
            .unwrap();
    }
    let mut seen: std::collections::BTreeMap<String, Vec<(u32, bool)>> = Default::default();
    tokio::time::timeout(SOON, async {
        while seen.values().map(Vec::len).sum::<usize>() < JOBS * 3 {
            if let Some(WorkerEvent::Failed {
                job_id,
                attempt,
                is_final,
                ..
            }) = events.recv().await
            {
                seen.entry(job_id).or_default().push((attempt, is_final));
            }
        }
    })
    .await
    .expect("three failure reports per job");
    for (job, reports) in &seen {
        assert_eq!(reports, &[(1, false), (2, false), (3, true)], "{job}");
    }
    workers.shutdown(SOON).await;
}

/// A job's timeout and trace context cost no key of their own: a job that carries them
/// leaves exactly the keys a bare job leaves, however it goes (so nothing outlives a
/// failed, removed or cleaned job), and the job's hash differs only by the options.
#[tokio::test]
async fn a_jobs_extras_live_in_its_own_hash_and_nowhere_else() {
    let redis = TestRedis::new("holes-extras");
    let app = redis
        .app(|b| {
            b.processor(Processor::new("extras-carried").any_job(always_fails))
                .processor(Processor::new("extras-bare").any_job(always_fails))
        })
        .await;
    let keys_of = |queue: &str| {
        let prefix = format!("{}:{queue}:", redis.prefix());
        let mut keys: Vec<String> = redis
            .keys()
            .into_iter()
            .filter_map(|k| k.strip_prefix(&prefix).map(str::to_owned))
            .collect();
        keys.sort();
        keys
    };
    let carried = app.queue::<u32>("extras-carried").unwrap();
    let bare = app.queue::<u32>("extras-bare").unwrap();
    queue_core::trace::scope(queue_core::trace::TraceContext::new_root(), async {
        for id in ["fail-1", "rm-1", "clean-1"] {
            let opts = JobOptions::new()
                .job_id(id)
                .timeout(Duration::from_secs(20));
            carried.add("x", 1, opts).await.unwrap();
        }
    })
    .await;
    for id in ["fail-1", "rm-1", "clean-1"] {
        bare.add("x", 1, JobOptions::new().job_id(id))
            .await
            .unwrap();
    }
    assert_eq!(keys_of("extras-carried"), keys_of("extras-bare"));
    let opts_len = |queue: &str| {
        redis
            .job_field(queue, "fail-1", "opts")
            .unwrap_or_default()
            .len()
    };
    assert!(opts_len("extras-carried") > opts_len("extras-bare"));

    assert!(carried.remove("rm-1").await.unwrap());
    assert!(bare.remove("rm-1").await.unwrap());
    for q in [&carried, &bare] {
        q.clean(Duration::ZERO, 1, JobState::Waiting).await.unwrap();
    }
    // One of the two left was cleaned; the other now fails for good.
    let mut left = None;
    for id in ["fail-1", "clean-1"] {
        if carried.get_job_state(id).await.unwrap().is_some() {
            left = Some(id);
        }
    }
    let left = left.expect("clean took one job of two");
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&carried, left, JobState::Failed, SOON).await;
    wait_for_state(&bare, left, JobState::Failed, SOON).await;
    workers.shutdown(SOON).await;
    assert_eq!(keys_of("extras-carried"), keys_of("extras-bare"));
}

async fn runs_long(_job: Job<u32>) -> Result<(), JobError> {
    tokio::time::sleep(Duration::from_millis(2500)).await;
    Ok(())
}

/// Renewing a running job's lock does not read the job (payload included) each time:
/// the keeper reads it once per attempt, then only extends the lock.
#[tokio::test]
async fn lock_renewals_do_not_read_the_whole_job_each_time() {
    let redis = queue_tests::PrivateRedis::start();
    let url = format!("redis://127.0.0.1:{}", redis.port());
    let app = queue_core::QueueApp::builder()
        .redis(&url)
        .registrations(queue_core::app::Registrations::None)
        .processor(
            Processor::new("long")
                .lock_duration(Duration::from_millis(400))
                .any_job(runs_long),
        )
        .build()
        .await
        .unwrap();
    let queue = app.queue::<u32>("long").unwrap();
    queue
        .add("x", 1, JobOptions::new().job_id("long-1"))
        .await
        .unwrap();
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query::<()>(&mut conn)
        .unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&queue, "long-1", JobState::Completed, SOON).await;
    workers.shutdown(SOON).await;
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut conn)
        .unwrap();
    let calls = |command: &str| -> u64 {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    // 2.5 s under a 400 ms lock: about a dozen renewals (each an extend-lock script).
    assert!(calls("evalsha") + calls("eval") >= 10, "{stats}");
    assert!(
        calls("hgetall") <= 2,
        "the job was read for renewals: {stats}"
    );
}
