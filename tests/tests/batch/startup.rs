//! Batches configured wrong are refused when the app is built, naming the queue.

use std::time::Duration;

use queue_core::{group::GroupLimits, Batch, BatchResult, Job, JobError, Processor};
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
