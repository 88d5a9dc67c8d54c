//! Producing jobs: add, add_bulk, job-id dedup, option checks, payload limits, and
//! what a bad connection looks like at start-up.

use std::time::{Duration, Instant};

use queue_core::{
    options::Deduplication, queue::BulkJob, Backoff, Error, JobOptions, JobState, QueueApp,
    Retention,
};
use queue_tests::fixtures::{welcome, WelcomeEmail};
use queue_tests::TestRedis;

#[tokio::test]
async fn add_stores_data_and_options_where_bullmq_reads_them() {
    let redis = TestRedis::new("add");
    let app = redis.app(|b| b).await;
    let email = app.queue::<WelcomeEmail>("email").unwrap();

    let added = email
        .add(
            "welcome",
            welcome(42),
            JobOptions::new()
                .job_id("welcome-42")
                .attempts(5)
                .backoff(Backoff::exponential(Duration::from_secs(3)))
                .remove_on_complete(Retention::Last(100))
                .remove_on_fail(Retention::Last(1000)),
        )
        .await
        .unwrap();
    assert_eq!(added.id, "welcome-42");
    assert!(!added.duplicate);
    assert_eq!(added.state, Some(JobState::Waiting));

    let stored = email
        .get_job("welcome-42")
        .await
        .unwrap()
        .expect("job exists");
    assert_eq!(stored.name, "welcome");
    assert_eq!(stored.data_as::<WelcomeEmail>().unwrap(), welcome(42));
    assert_eq!(stored.max_attempts, 5);

    // What a Node BullMQ worker would read from the hash.
    let data = redis.job_field("email", "welcome-42", "data").unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&data).unwrap()["userId"],
        42
    );
    let opts: serde_json::Value =
        serde_json::from_str(&redis.job_field("email", "welcome-42", "opts").unwrap()).unwrap();
    assert_eq!(opts["attempts"], 5);
    assert_eq!(opts["backoff"]["type"], "exponential");
    assert_eq!(opts["backoff"]["delay"], 3000);
    assert_eq!(opts["removeOnComplete"], 100);
    assert_eq!(opts["removeOnFail"], 1000);
    assert_eq!(email.get_job_counts().await.unwrap().waiting, 1);
}

#[tokio::test]
async fn same_job_id_adds_nothing_and_says_duplicate() {
    let redis = TestRedis::new("dedup");
    let app = redis.app(|b| b).await;
    let email = app.queue::<WelcomeEmail>("email").unwrap();
    let opts = JobOptions::new().job_id("welcome-7");

    let first = email
        .add("welcome", welcome(7), opts.clone())
        .await
        .unwrap();
    let second = email.add("welcome", welcome(8), opts).await.unwrap();

    assert!(!first.duplicate);
    assert!(second.duplicate);
    assert_eq!(second.id, "welcome-7");
    assert_eq!(second.state, Some(JobState::Waiting));
    assert_eq!(email.get_job_counts().await.unwrap().waiting, 1);
    let kept = email.get_job("welcome-7").await.unwrap().unwrap();
    assert_eq!(
        kept.data_as::<WelcomeEmail>().unwrap().user_id,
        7,
        "the first payload is kept"
    );
}

#[tokio::test]
async fn deduplication_id_drops_the_second_add() {
    let redis = TestRedis::new("dedup-id");
    let app = redis.app(|b| b).await;
    let reports = app.queue::<u32>("reports").unwrap();
    let opts = JobOptions::new().deduplication(Deduplication::new("report-1"));

    let first = reports.add("build", 1, opts.clone()).await.unwrap();
    let second = reports.add("build", 2, opts).await.unwrap();
    assert!(!first.duplicate);
    assert!(second.duplicate);
    assert_eq!(second.id, first.id, "the existing job is reported");
    assert_eq!(reports.get_job_counts().await.unwrap().waiting, 1);
}

#[tokio::test]
async fn add_bulk_adds_every_job_in_one_call() {
    let redis = TestRedis::new("bulk");
    let app = redis.app(|b| b).await;
    let email = app.queue::<WelcomeEmail>("email").unwrap();
    let jobs = (1..=50)
        .map(|i| {
            BulkJob::new("welcome", welcome(i))
                .options(JobOptions::new().job_id(format!("welcome-{i}")))
        })
        .collect();

    let added = email.add_bulk(jobs).await.unwrap();
    assert_eq!(added.len(), 50);
    assert!(added.iter().all(|a| !a.duplicate));
    assert_eq!(added[9].id, "welcome-10");
    assert_eq!(email.get_job_counts().await.unwrap().waiting, 50);

    let again = email
        .add_bulk(vec![
            BulkJob::new("welcome", welcome(3)).options(JobOptions::new().job_id("welcome-3"))
        ])
        .await
        .unwrap();
    assert!(again[0].duplicate);
}

#[tokio::test]
async fn unreachable_redis_fails_build_quickly_with_the_url_and_cause() {
    // Nothing listens on port 1 of loopback.
    let started = Instant::now();
    let err = QueueApp::builder()
        .redis("redis://user:secret@127.0.0.1:1/0")
        .build()
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "took {:?}",
        started.elapsed()
    );
    let message = err.to_string();
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(
        message.contains("redis://user:***@127.0.0.1:1/0"),
        "{message}"
    );
    assert!(!message.contains("secret"), "{message}");
    assert!(message.contains("refused"), "the cause is given: {message}");
    assert!(err.is_unavailable());
}

#[tokio::test]
async fn a_malformed_url_is_refused_with_its_reason() {
    let err = QueueApp::builder()
        .redis("http://nope")
        .build()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a valid Redis URL"), "{err}");
}

#[tokio::test]
async fn queue_names_and_prefixes_follow_bullmq_rules() {
    let redis = TestRedis::new("names");
    let app = redis.app(|b| b).await;
    assert!(matches!(
        app.queue::<()>("a:b"),
        Err(Error::InvalidOption {
            option: "queue",
            ..
        })
    ));
    assert!(matches!(
        app.queue::<()>(""),
        Err(Error::InvalidOption {
            option: "queue",
            ..
        })
    ));
    let err = QueueApp::builder().prefix("x:y").build().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidOption {
                option: "prefix",
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn app_default_options_apply_unless_the_job_sets_its_own() {
    let redis = TestRedis::new("defaults");
    let app = redis
        .app(|b| {
            b.default_job_options(
                JobOptions::new()
                    .attempts(4)
                    .remove_on_complete(Retention::Last(10)),
            )
        })
        .await;
    let q = app.queue::<u8>("q").unwrap();
    q.add("a", 1, JobOptions::new().job_id("a-1"))
        .await
        .unwrap();
    q.add("b", 2, JobOptions::new().job_id("b-1").attempts(2))
        .await
        .unwrap();
    assert_eq!(q.get_job("a-1").await.unwrap().unwrap().max_attempts, 4);
    assert_eq!(q.get_job("b-1").await.unwrap().unwrap().max_attempts, 2);
    let opts: serde_json::Value =
        serde_json::from_str(&redis.job_field("q", "b-1", "opts").unwrap()).unwrap();
    assert_eq!(opts["removeOnComplete"], 10);
}

#[tokio::test]
async fn delete_prefix_only_deletes_test_prefixes() {
    let app = QueueApp::builder()
        .redis(queue_tests::redis_url())
        .build()
        .await
        .unwrap();
    let err = queue_core::testing::delete_prefix(&app).await.unwrap_err();
    assert!(
        err.to_string().contains("only deletes test prefixes"),
        "{err}"
    );

    let redis = TestRedis::new("cleanup");
    let app = redis.app(|b| b).await;
    app.queue::<u8>("q")
        .unwrap()
        .add("x", 1, JobOptions::new())
        .await
        .unwrap();
    assert!(queue_core::testing::delete_prefix(&app).await.unwrap() > 0);
    assert!(redis.keys().is_empty());
}
