//! A handler that blocks its thread for longer than its job's lock: the lock is still
//! renewed (the engine runs on its own threads), so the job is not recovered as
//! stalled and run twice, and the block is reported.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use queue_core::{Dep, Job, JobError, JobOptions, JobState, Processor, QueueApp, WorkerEvent};
use queue_tests::{redis_url, wait_for_state, TestRedis, SOON};

const LOCK: Duration = Duration::from_millis(1_000);
const BLOCK: Duration = Duration::from_millis(2_500);

struct Runs(AtomicUsize);

/// Synchronous work in async code: holds the runtime's only thread for 2.5 locks.
async fn crunch(_job: Job<u32>, runs: Dep<Runs>) -> Result<(), JobError> {
    runs.0.fetch_add(1, Ordering::SeqCst);
    std::thread::sleep(BLOCK);
    Ok(())
}

fn blocking_processor() -> Processor {
    Processor::new("crunch")
        .lock_duration(LOCK)
        .stalled_interval(Duration::from_millis(300))
        .job("crunch", crunch)
}

async fn app(prefix: &str, runs: &Arc<Runs>) -> QueueApp {
    QueueApp::builder()
        .redis(redis_url())
        .prefix(prefix)
        .provide_arc(runs.clone())
        .processor(blocking_processor())
        .build()
        .await
        .unwrap()
}

/// Collects the worker events of `app` until the test ends.
fn record_events(app: &QueueApp) -> Arc<std::sync::Mutex<Vec<WorkerEvent>>> {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut events = app.worker_events();
    let sink = seen.clone();
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            sink.lock().unwrap().push(event);
        }
    });
    seen
}

// `#[tokio::test]` is a single-threaded runtime: the blocked handler stops everything
// on it. A second worker on its own thread is ready to take the job over if its lock
// lapses, as another process would.
#[tokio::test]
async fn a_handler_blocking_past_its_lock_keeps_the_lock_and_runs_once() {
    let redis = TestRedis::new("blocking");
    let runs = Arc::new(Runs(AtomicUsize::new(0)));

    let (stop_other, other_stopped) = tokio::sync::oneshot::channel::<()>();
    let (other_ready, other_is_ready) = std::sync::mpsc::channel();
    let other = {
        let (prefix, runs) = (redis.prefix().to_owned(), runs.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let app = app(&prefix, &runs).await;
                let seen = record_events(&app);
                let workers = app.start_workers().await.unwrap();
                other_ready.send(()).unwrap();
                let _ = other_stopped.await;
                workers.shutdown(SOON).await;
                let events = seen.lock().unwrap().clone();
                events
            })
        })
    };
    other_is_ready.recv().unwrap();

    let app = app(redis.prefix(), &runs).await;
    let seen = record_events(&app);
    let workers = app.start_workers().await.unwrap();
    let q = app.queue::<u32>("crunch").unwrap();
    q.add("crunch", 1, JobOptions::new().job_id("crunch-1"))
        .await
        .unwrap();

    wait_for_state(&q, "crunch-1", JobState::Completed, SOON).await;
    workers.shutdown(SOON).await;
    stop_other.send(()).unwrap();
    let mut events = other.join().unwrap();
    events.extend(seen.lock().unwrap().iter().cloned());

    assert_eq!(
        runs.0.load(Ordering::SeqCst),
        1,
        "the handler ran more than once"
    );
    let info = q.get_job("crunch-1").await.unwrap().unwrap();
    assert_eq!(info.attempts_made, 1);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, WorkerEvent::Stalled { .. })),
        "the job was recovered as stalled: {events:?}"
    );
    let blocked: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            WorkerEvent::Blocked {
                job_id,
                blocked_for,
                ..
            } => Some((job_id.as_str(), *blocked_for)),
            _ => None,
        })
        .collect();
    assert_eq!(blocked.len(), 1, "one report of the block: {events:?}");
    assert_eq!(blocked[0].0, "crunch-1");
    assert!(blocked[0].1 >= BLOCK, "reported {:?}", blocked[0].1);
}
