//! Engine events the worker could not read in time (issue 27, item 13): the engine's
//! bounded event channel drops them, and the count is no longer invisible.

use std::time::Duration;

use queue_core::metrics::Metrics;
use queue_core::{queue::BulkJob, Job, JobError, JobOptions, Processor, Retention};
use queue_tests::{wait_for_completed, TestRedis, SOON};

async fn nothing(_job: Job<u32>) -> Result<(), JobError> {
    Ok(())
}

/// A channel of one event, and nobody listening (so it is read in batches): most of
/// the engine's events are dropped. The scrape counts them for the queue, and the jobs
/// themselves are not affected.
#[tokio::test]
async fn dropped_engine_events_are_counted_in_the_metrics() {
    const JOBS: u64 = 200;
    let redis = TestRedis::new("dropped-events");
    let metrics = Metrics::new();
    let app = redis
        .app(|b| {
            b.metrics(metrics.clone()).processor(
                Processor::new("dropping")
                    .concurrency(10)
                    .worker_event_capacity(1)
                    .any_job(nothing),
            )
        })
        .await;
    let queue = app.queue::<u32>("dropping").unwrap();
    let workers = app.start_workers().await.unwrap();
    queue
        .add_bulk((0..JOBS).map(|n| BulkJob::new("x", n as u32)).collect())
        .await
        .unwrap();
    wait_for_completed(&queue, JOBS, SOON).await;
    assert!(workers.shutdown(Duration::from_secs(5)).await.is_clean());

    let scraped = metrics.render(&app).await.unwrap();
    let dropped: f64 = scraped
        .lines()
        .find(|l| l.starts_with(r#"queue_worker_events_dropped_total{queue="dropping"}"#))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no dropped-events count in:\n{scraped}"));
    assert!(dropped > 0.0, "{scraped}");
    // Every job counted as completed all the same: the worker's own outcome counts.
    assert!(
        scraped.contains(&format!(
            r#"queue_jobs_completed_total{{queue="dropping",name="*"}} {JOBS}"#
        )),
        "{scraped}"
    );
}

/// Nobody listening, the events are read in batches, but every one of them: a batch
/// is not cut short by tokio's cooperative budget (128 reads a turn, which capped the
/// reading at a few thousand events a second, and the channel overflowed at full speed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_nobody_listens_to_reads_its_engine_events_at_full_speed() {
    const JOBS: u64 = 6_000;
    let redis = TestRedis::new("unheard-events");
    let metrics = Metrics::new();
    let app = redis
        .app(|b| {
            b.metrics(metrics.clone())
                .processor(Processor::new("unheard").concurrency(50).any_job(nothing))
        })
        .await;
    let queue = app.queue::<u32>("unheard").unwrap();
    for chunk in (0..JOBS).collect::<Vec<_>>().chunks(1_000) {
        queue
            .add_bulk(
                chunk
                    .iter()
                    .map(|n| {
                        BulkJob::new("x", *n as u32)
                            .options(JobOptions::new().remove_on_complete(Retention::All))
                    })
                    .collect(),
            )
            .await
            .unwrap();
    }
    let started = std::time::Instant::now();
    let workers = app.start_workers().await.unwrap();
    wait_for_completed(&queue, JOBS, Duration::from_secs(120)).await;
    let took = started.elapsed();
    assert!(workers.shutdown(Duration::from_secs(5)).await.is_clean());
    let scraped = metrics.render(&app).await.unwrap();
    let dropped = scraped
        .lines()
        .find(|l| l.starts_with(r#"queue_worker_events_dropped_total{queue="unheard"}"#));
    assert!(
        dropped.is_none(),
        "{JOBS} jobs in {took:?}, engine events dropped: {dropped:?}"
    );
}
