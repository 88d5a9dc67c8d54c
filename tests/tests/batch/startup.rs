//! Batches configured wrong are refused when the app is built, naming the queue.

use std::time::Duration;

use queue_core::worker::{Batch, BatchResult};
use queue_core::{group::GroupLimits, Job, JobError, Processor};
use queue_tests::TestRedis;

async fn rows(_batch: Batch<u32>) -> Result<BatchResult, JobError> {
    Ok(BatchResult::new())
}

async fn one(_job: Job<u32>) -> Result<(), JobError> {
    Ok(())
}

#[tokio::test]
async fn a_batch_queue_with_a_wrong_setting_is_refused_at_build() {
    let redis = TestRedis::new("batch-startup");
    let refused = |processor: Processor, expected: &'static str| {
        let builder = redis.builder().processor(processor);
        async move {
            let error = builder.build().await.expect_err("refused").to_string();
            assert!(error.contains(expected), "{error}");
            assert!(error.contains("rows"), "names the queue: {error}");
        }
    };
    let wait = Duration::from_millis(20);
    refused(
        Processor::new("rows").batch(0, wait, rows),
        "size must be 1 to 1000",
    )
    .await;
    refused(
        Processor::new("rows").batch(1_001, wait, rows),
        "size must be 1 to 1000",
    )
    .await;
    refused(
        Processor::new("rows").batch(10, Duration::from_secs(20), rows),
        "at most half its lock duration",
    )
    .await;
    refused(
        Processor::new("rows")
            .groups(GroupLimits::new().concurrency(1))
            .batch(10, wait, rows),
        "batches do not take jobs by group",
    )
    .await;
    refused(
        Processor::new("rows")
            .job("single", one)
            .batch(10, wait, rows),
        "its batch handler must be its only handler",
    )
    .await;
}

/// The macro's form: registered by `#[processor(.., batch(..))]`, run in batches.
#[queue_core::processor("batch-macro-rows", concurrency = 1, batch(size = 5, wait = "300ms"))]
async fn macro_rows(batch: Batch<u32>) -> Result<BatchResult, JobError> {
    let mut result = BatchResult::new();
    let size = batch.len();
    for job in &batch {
        result.complete(job, size);
    }
    Ok(result)
}

#[tokio::test]
async fn a_processor_registered_by_the_macro_runs_in_batches() {
    let redis = TestRedis::new("batch-macro");
    let app = redis
        .builder()
        .registrations(queue_core::app::Registrations::Queues(vec![
            "batch-macro-rows".into(),
        ]))
        .build()
        .await
        .unwrap();
    let q = app.queue::<u32>("batch-macro-rows").unwrap();
    let mut added = Vec::new();
    for n in 0..5 {
        added.push(
            q.add("row", n, queue_core::JobOptions::new())
                .await
                .unwrap(),
        );
    }
    let workers = app.start_workers().await.unwrap();
    for job in added {
        let outcome = job.wait(queue_tests::SOON).await.unwrap();
        // Each job's return value is the size of the batch it ran in: all five at once.
        assert_eq!(
            outcome,
            queue_core::JobOutcome::Completed(serde_json::json!(5))
        );
    }
    workers.shutdown(queue_tests::SOON).await;
}
