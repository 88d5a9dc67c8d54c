//! The linker pitfall: a processor in a library crate registers only when the binary
//! links that crate. The documented fix is one line, which this test relies on:
use helper_jobs as _;

use queue_core::{app::Registrations, JobOptions, JobState, QueueApp};
use queue_tests::{wait_for_state, TestRedis, SOON};

#[tokio::test]
async fn a_processor_in_a_library_crate_registers_once_the_crate_is_linked() {
    let only_helper = Registrations::Queues(vec![helper_jobs::QUEUE.to_owned()]);
    let builder = QueueApp::builder().registrations(only_helper.clone());
    builder.check().unwrap();

    let redis = TestRedis::new("linker");
    let app = redis.app(|b| b.registrations(only_helper)).await;
    assert_eq!(app.processor_queues(), [helper_jobs::QUEUE]);
    let workers = app.start_workers().await.unwrap();
    let q = app.queue::<u32>(helper_jobs::QUEUE).unwrap();
    q.add("build", 7, JobOptions::new().job_id("report-7"))
        .await
        .unwrap();
    wait_for_state(&q, "report-7", JobState::Completed, SOON).await;
    assert_eq!(
        q.get_job("report-7").await.unwrap().unwrap().return_value,
        Some(serde_json::json!("report 7"))
    );
    workers.shutdown(SOON).await;
}
