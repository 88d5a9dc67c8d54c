//! A slow `#[on_worker_event]` listener: it is called for one event at a time, never
//! grows memory, and what it cannot take is dropped and counted, not lost silently.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use queue_core::app::Registrations;
use queue_core::prelude::*;
use queue_core::{on_worker_event, queue::BulkJob};
use queue_tests::{wait_for_completed, wait_until, TestRedis};

static RUNNING: AtomicUsize = AtomicUsize::new(0);
static MOST_AT_ONCE: AtomicUsize = AtomicUsize::new(0);
static CALLS: AtomicUsize = AtomicUsize::new(0);

#[on_worker_event("slow-listener", completed)]
async fn slow(_event: WorkerEvent) {
    let now = RUNNING.fetch_add(1, Ordering::SeqCst) + 1;
    MOST_AT_ONCE.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(3)).await;
    RUNNING.fetch_sub(1, Ordering::SeqCst);
    CALLS.fetch_add(1, Ordering::SeqCst);
}

async fn work(_job: Job<u32>) -> Result<(), JobError> {
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_listener_runs_one_event_at_a_time_and_its_overflow_is_counted() {
    const JOBS: u32 = 3000;
    let redis = TestRedis::new("slow-listener");
    let app = redis
        .app(|b| {
            b.registrations(Registrations::Queues(vec!["slow-listener".into()]))
                .default_job_options(JobOptions::new().remove_on_complete(Retention::All))
                .processor(
                    Processor::new("slow-listener")
                        .concurrency(50)
                        .any_job(work),
                )
        })
        .await;
    let queue = app.queue::<u32>("slow-listener").unwrap();
    queue
        .add_bulk((0..JOBS).map(|n| BulkJob::new("n", n)).collect())
        .await
        .unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_completed(&queue, u64::from(JOBS), Duration::from_secs(60)).await;
    let dropped = || {
        let stats = workers.listener_stats();
        stats
            .iter()
            .find(|s| s.listener.ends_with("slow"))
            .unwrap_or_else(|| panic!("{stats:?}"))
            .dropped
    };
    // Every event is either delivered or counted as dropped, none lost silently.
    wait_until(
        Duration::from_secs(30),
        "every event delivered or counted",
        || async {
            (CALLS.load(Ordering::SeqCst) as u64 + dropped() == u64::from(JOBS)).then_some(())
        },
    )
    .await;
    assert!(
        dropped() > 0,
        "3 ms per event cannot keep up with {JOBS} jobs"
    );
    assert_eq!(MOST_AT_ONCE.load(Ordering::SeqCst), 1, "one call at a time");
    workers.shutdown(Duration::from_secs(10)).await;
}
