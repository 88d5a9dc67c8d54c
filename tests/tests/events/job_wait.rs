//! Awaiting a job from Rust (`AddedJob::wait`, `wait_for`, a flow's root), on one
//! shared reader of the queue's events: the typed output, the failure, a timeout, and a
//! job that finished between its `add` and the wait's subscription.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queue_core::app::Registrations;
use queue_core::prelude::*;
use queue_core::{testing, OnChildFailure, Workers};
use queue_tests::{wait_for_state, wait_until, TestRedis, SOON};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Square {
    n: u64,
    #[serde(default)]
    work_ms: u64,
    #[serde(default)]
    fail: bool,
}

#[job_queue("jw-math")]
enum Math {
    #[job("square", output = u64)]
    Square(Square),
}

#[processor(Math, concurrency = 8)]
async fn square(job: Job<Square>) -> Result<u64, JobError> {
    tokio::time::sleep(Duration::from_millis(job.data.work_ms)).await;
    if job.data.fail {
        return Err(JobError::unrecoverable(std::io::Error::other(
            "negative numbers only",
        )));
    }
    Ok(job.data.n * job.data.n)
}

fn sq(n: u64) -> Square {
    Square {
        n,
        work_ms: 0,
        fail: false,
    }
}

#[tokio::test]
async fn wait_for_yields_the_typed_output_of_a_declared_job() {
    let redis = TestRedis::new("jw-typed");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Math>()))
        .await;
    let workers = app.start_workers().await.unwrap();
    let math = app.queue_of::<Math>().unwrap();
    let added = math
        .add_job(
            Square {
                work_ms: 50,
                ..sq(7)
            },
            JobOptions::new().job_id("square-7"),
        )
        .await
        .unwrap();
    let outcome = added.wait_for::<Square>(SOON).await.unwrap();
    assert_eq!(outcome, JobOutcome::Completed(49u64));
    // The JSON form, of a job finished before the call: read from its state.
    assert_eq!(
        added.wait(SOON).await.unwrap(),
        JobOutcome::Completed(serde_json::json!(49))
    );
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn wait_yields_the_failure_of_a_job_that_failed_for_good() {
    let redis = TestRedis::new("jw-failed");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Math>()))
        .await;
    let workers = app.start_workers().await.unwrap();
    let added = app
        .queue_of::<Math>()
        .unwrap()
        .add_job(
            Square {
                fail: true,
                work_ms: 30,
                ..sq(3)
            },
            JobOptions::new().attempts(2),
        )
        .await
        .unwrap();
    match added.wait_for::<Square>(SOON).await.unwrap() {
        JobOutcome::Failed { reason } => assert!(reason.contains("negative"), "{reason}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn wait_times_out_on_a_job_nobody_runs_and_leaves_no_watcher() {
    let redis = TestRedis::new("jw-timeout");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Math>()))
        .await;
    let added = app
        .queue_of::<Math>()
        .unwrap()
        .add_job(sq(2), JobOptions::new())
        .await
        .unwrap();
    let started = Instant::now();
    let outcome = added.wait(Duration::from_millis(400)).await.unwrap();
    assert_eq!(outcome, JobOutcome::TimedOut);
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(400), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(app.watch_stats().watchers, 0);
    // A wait dropped midway (its caller went away) leaves nothing either.
    let waiting = tokio::spawn({
        let added = added.clone();
        async move { added.wait(Duration::from_secs(60)).await }
    });
    wait_until(SOON, "the wait to subscribe", || async {
        (app.watch_stats().watchers == 1).then_some(())
    })
    .await;
    waiting.abort();
    wait_until(SOON, "the aborted wait to leave", || async {
        (app.watch_stats().watchers == 0).then_some(())
    })
    .await;
}

/// The lost wake-up: the job completes after `add` and before the wait subscribes
/// (forced by the test hook), so no event will ever come; the wait must read the
/// state after subscribing and see it.
#[tokio::test]
async fn a_job_finished_between_add_and_subscription_is_seen() {
    let redis = TestRedis::new("jw-race");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Math>()))
        .await;
    let math = app.queue_of::<Math>().unwrap();
    let added = math
        .add_job(sq(9), JobOptions::new().job_id("square-race"))
        .await
        .unwrap();
    let held: Arc<Mutex<Option<Workers>>> = Arc::default();
    testing::before_watch(&added.queue, &added.id, {
        let (app, held, math) = (app.clone(), held.clone(), math.clone());
        async move {
            let workers = app.start_workers().await.unwrap();
            wait_for_state(&math, "square-race", JobState::Completed, SOON).await;
            *held.lock().unwrap() = Some(workers);
        }
    });
    let started = Instant::now();
    let outcome = added
        .wait_for::<Square>(Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(outcome, JobOutcome::Completed(81));
    assert!(started.elapsed() < SOON, "seen at once, not at the timeout");
    let workers = held.lock().unwrap().take().expect("the hook ran");
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn a_flows_root_is_awaited() {
    let redis = TestRedis::new("jw-flow");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Math>()))
        .await;
    let workers = app.start_workers().await.unwrap();
    let math = app.queue_of::<Math>().unwrap();
    let flow = math
        .flow_job_of(sq(4))
        .options(JobOptions::new().job_id("square-root"))
        .child(OnChildFailure::FailParent, math.flow_job_of(sq(5)));
    let added = app.add_flow(flow).await.unwrap();
    assert_eq!(
        added.wait_for::<Square>(SOON).await.unwrap(),
        JobOutcome::Completed(16)
    );
    // A child's own wait works as well: it finished before its parent.
    assert_eq!(
        added.children[0].job.wait(SOON).await.unwrap(),
        JobOutcome::Completed(serde_json::json!(25))
    );
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn waits_on_one_queue_share_one_reader_which_stops_when_nobody_waits() {
    let redis = TestRedis::new("jw-shared");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Math>()))
        .await;
    let math = app.queue_of::<Math>().unwrap();
    let jobs = (0..50u64).map(|n| {
        (
            Square {
                work_ms: 20,
                ..sq(n)
            },
            JobOptions::new(),
        )
    });
    let added = math.add_jobs(jobs).await.unwrap();
    let waits: Vec<_> = added
        .iter()
        .cloned()
        .map(|job| tokio::spawn(async move { job.wait_for::<Square>(SOON).await }))
        .collect();
    wait_until(SOON, "every wait to subscribe", || async {
        (app.watch_stats().watchers == 50).then_some(())
    })
    .await;
    assert_eq!(app.watch_stats().readers, 1, "one reader for the queue");
    let workers = app.start_workers().await.unwrap();
    for (n, wait) in waits.into_iter().enumerate() {
        let n = n as u64;
        assert_eq!(wait.await.unwrap().unwrap(), JobOutcome::Completed(n * n));
    }
    assert_eq!(app.watch_stats().watchers, 0);
    wait_until(SOON, "the unwatched reader to stop", || async {
        (app.watch_stats().readers == 0).then_some(())
    })
    .await;
    workers.shutdown(SOON).await;
}
