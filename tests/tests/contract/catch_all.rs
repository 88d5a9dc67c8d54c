//! A catch-all processor on a declared queue takes its declared jobs: `build` does not
//! warn that they are unhandled, and the app reports them handled.

use queue_core::app::Registrations;
use queue_core::prelude::*;
use queue_tests::logs::Logs;
use queue_tests::{wait_for_state, TestRedis, SOON};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Resize {
    width: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Thumbnail {
    size: u32,
}

#[job_queue("catch-all-images")]
enum Images {
    #[job("resize")]
    Resize(Resize),
    #[job("thumbnail")]
    Thumbnail(Thumbnail),
}

/// Every job of the queue, whatever its name: the catch-all.
async fn any_image(job: Job<serde_json::Value>) -> Result<String, JobError> {
    Ok(format!("{} done", job.name()))
}

#[tokio::test]
async fn a_catch_all_handles_the_declared_jobs_without_a_warning() {
    let redis = TestRedis::new("catch-all");
    let logs = Logs::default();
    let app = {
        let _capture = logs.capture();
        redis
            .app(|b| {
                b.registrations(Registrations::None)
                    .processor(Processor::new("catch-all-images").any_job(any_image))
            })
            .await
    };
    let warnings: Vec<String> = logs
        .at(tracing::Level::WARN)
        .into_iter()
        .map(|e| e.fields)
        .filter(|f| f.contains("catch-all-images"))
        .collect();
    assert!(warnings.is_empty(), "{warnings:#?}");
    let ours: Vec<(String, bool)> = app
        .declared_jobs()
        .iter()
        .filter(|j| j.queue == "catch-all-images")
        .map(|j| (j.name.clone(), j.handled))
        .collect();
    assert_eq!(
        ours,
        [("resize".to_owned(), true), ("thumbnail".to_owned(), true)]
    );

    // And it does take them.
    let workers = app.start_workers().await.unwrap();
    let added = app
        .add_job(Thumbnail { size: 64 }, JobOptions::new().job_id("thumb-1"))
        .await
        .unwrap();
    let q = app.queue_of::<Images>().unwrap();
    wait_for_state(&q, &added.id, JobState::Completed, SOON).await;
    workers.shutdown(SOON).await;
}
