//! A Redis outage is quiet: each component says once that it lost Redis and once that it
//! has it back (with how long it was gone); repeats go to `debug`. One test in this
//! binary: it records every thread's logs through the global subscriber.

use std::time::Duration;

use queue_core::app::Registrations;
use queue_core::prelude::*;
use queue_tests::logs::Logs;
use queue_tests::{wait_until, PrivateRedis, SOON};

const QUEUES: [&str; 4] = ["mail", "coupons", "exports", "calls"];

async fn done(_: Job<String>) -> Result<(), JobError> {
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_second_outage_logs_each_loss_and_return_once() {
    let logs = Logs::default();
    tracing::subscriber::set_global_default(logs.subscriber()).expect("the only subscriber");
    let mut redis = PrivateRedis::start_with(&["--appendonly", "no", "--save", ""]);
    let mut builder = QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .registrations(Registrations::None);
    for queue in QUEUES {
        builder = builder.processor(Processor::new(queue).any_job(done));
    }
    let app = builder.build().await.unwrap();
    let workers = app.start_workers().await.unwrap();
    let mail = app.queue::<String>("mail").unwrap();
    mail.add("x", "before".to_owned(), JobOptions::new())
        .await
        .unwrap();
    wait_until(SOON, "a job before the outage", || async {
        (mail.get_job_counts().await.ok()?.completed == 1).then_some(())
    })
    .await;

    let before = logs.all().len();
    redis.kill();
    tokio::time::sleep(Duration::from_secs(10)).await;
    redis.restart();
    // Back: a job added now is processed.
    let added = wait_until(SOON, "an add after the outage", || async {
        mail.add("x", "after".to_owned(), JobOptions::new())
            .await
            .ok()
    })
    .await;
    wait_until(
        Duration::from_secs(30),
        "the job after the outage",
        || async {
            (mail.get_job_state(&added.id).await.ok()? == Some(JobState::Completed)).then_some(())
        },
    )
    .await;
    // The reports of the return come within a moment of it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let during: Vec<_> = logs.all()[before..]
        .iter()
        .filter(|e| e.level <= tracing::Level::INFO)
        .cloned()
        .collect();
    let text = queue_tests::logs::as_text(&during);
    eprintln!("{} lines at info or above:\n{text}", during.len());
    workers.shutdown(SOON).await;
    // Each component says once that it lost Redis and once that it has it back: no
    // line repeats (the same message about the same queue).
    let repeated = queue_tests::logs::repeated_lines(&during);
    assert!(
        repeated.is_empty(),
        "repeated lines {repeated:?} in:\n{text}"
    );
    for queue in QUEUES {
        let back = |what: &str| {
            during.iter().any(|e| {
                e.level == tracing::Level::INFO
                    && e.fields.contains(what)
                    && e.fields.contains(&format!("queue={queue} "))
                    && e.fields.contains("down_for=")
            })
        };
        assert!(
            back("worker has Redis back"),
            "no worker back line for {queue}:\n{text}"
        );
        assert!(
            back("the cancellation listener has Redis back"),
            "no listener back line for {queue}:\n{text}"
        );
    }
    // Four queues, two components each, two lines each.
    assert!(during.len() <= 16, "{} lines:\n{text}", during.len());
}
