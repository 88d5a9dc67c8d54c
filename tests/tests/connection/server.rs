//! Connections beyond the happy path: TLS (`rediss://`), and Redis going away while an
//! app runs. Both use a private `redis-server`; the shared one is never touched.

use std::time::Duration;

use queue_core::{
    connection::Tls, Job, JobError, JobOptions, JobState, Processor, Queue, QueueApp, Workers,
};
use queue_tests::{wait_for_state, wait_until, PrivateRedis, SOON};

async fn echo(job: Job<String>) -> Result<String, JobError> {
    Ok(job.data)
}

/// An app on `redis` with a worker for `queue`, shown to work with one job.
async fn working_on(redis: &PrivateRedis, queue: &str) -> (QueueApp, Queue<String>, Workers) {
    let app = QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .processor(Processor::new(queue).any_job(echo))
        .build()
        .await
        .unwrap();
    let q = app.queue::<String>(queue).unwrap();
    let workers = app.start_workers().await.unwrap();
    q.add("e", "before".into(), JobOptions::new().job_id("before-1"))
        .await
        .unwrap();
    wait_for_state(&q, "before-1", JobState::Completed, SOON).await;
    (app, q, workers)
}

#[tokio::test]
async fn rediss_urls_connect_and_run_jobs_over_tls() {
    let redis = PrivateRedis::start_tls();
    let url = format!("rediss://127.0.0.1:{}", redis.port());
    let app = QueueApp::builder()
        .redis(&url)
        .tls(Tls::new().root_cert_pem(redis.ca_pem()))
        .processor(Processor::new("tls").any_job(echo))
        .build()
        .await
        .unwrap();
    let q = app.queue::<String>("tls").unwrap();
    let workers = app.start_workers().await.unwrap();
    q.add("e", "over tls".into(), JobOptions::new().job_id("tls-1"))
        .await
        .unwrap();
    wait_for_state(&q, "tls-1", JobState::Completed, SOON).await;
    let info = q.get_job("tls-1").await.unwrap().unwrap();
    assert_eq!(info.return_value, Some(serde_json::json!("over tls")));
    assert!(workers.shutdown(SOON).await.is_clean());

    // Without trusting the CA, the certificate is refused: verification really runs.
    let untrusted = QueueApp::builder()
        .redis(&url)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap_err();
    assert!(
        untrusted.to_string().contains("cannot connect"),
        "{untrusted}"
    );

    // A plain-text client is not let in: the listener really is TLS.
    let plain = QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .connect_timeout(Duration::from_secs(1))
        .build()
        .await;
    assert!(plain.is_err());
}

#[tokio::test]
async fn redis_going_away_gives_errors_not_panics_and_nothing_hangs() {
    let mut redis = PrivateRedis::start();
    let (_app, q, workers) = working_on(&redis, "gone").await;

    redis.kill();
    let err = wait_until(SOON, "an add to fail", || async {
        q.add("e", "during".into(), JobOptions::new()).await.err()
    })
    .await;
    assert!(err.is_unavailable(), "{err:?}");
    let report = tokio::time::timeout(
        Duration::from_secs(15),
        workers.shutdown(Duration::from_secs(2)),
    )
    .await
    .expect("shutdown does not hang while Redis is down");
    assert!(report.is_clean());
}

#[tokio::test]
async fn password_and_database_come_from_the_url() {
    let redis = PrivateRedis::start_with(&["--requirepass", "s3cret"]);
    let port = redis.port();

    let wrong = QueueApp::builder()
        .redis(format!("redis://:wrong@127.0.0.1:{port}"))
        .build()
        .await
        .unwrap_err();
    let message = wrong.to_string();
    assert!(message.contains(":***@127.0.0.1"), "{message}");
    assert!(
        !message.contains("wrong@"),
        "the password is not echoed: {message}"
    );
    assert!(
        message.to_lowercase().contains("authentication failed"),
        "{message}"
    );

    let app = QueueApp::builder()
        .redis(format!("redis://:s3cret@127.0.0.1:{port}/3"))
        .build()
        .await
        .unwrap();
    app.queue::<u8>("db")
        .unwrap()
        .add("x", 1, JobOptions::new().job_id("in-db-3"))
        .await
        .unwrap();
    let mut conn = redis::Client::open(format!("redis://:s3cret@127.0.0.1:{port}/3"))
        .unwrap()
        .get_connection()
        .unwrap();
    let exists: bool = redis::cmd("EXISTS")
        .arg("bull:db:in-db-3")
        .query(&mut conn)
        .unwrap();
    assert!(exists, "the job is in database 3");
}

#[tokio::test]
async fn a_worker_resumes_within_seconds_when_redis_comes_back() {
    let mut redis = PrivateRedis::start();
    let (_app, q, workers) = working_on(&redis, "back").await;

    // All data gone, every connection dropped. The producer's first command after the
    // drop may fail; an add with a job id is retried once by `add` itself.
    redis.restart();
    let added = wait_until(SOON, "an add to succeed again", || async {
        q.add("e", "after".into(), JobOptions::new().job_id("after-1"))
            .await
            .ok()
    })
    .await;
    assert!(!added.duplicate);
    let started = std::time::Instant::now();
    wait_for_state(&q, "after-1", JobState::Completed, SOON).await;
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "resumed after {:?}",
        started.elapsed()
    );
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn killed_connections_are_survived_by_the_next_add_and_the_worker() {
    let redis = PrivateRedis::start();
    let url = format!("redis://127.0.0.1:{}", redis.port());
    let (_app, q, workers) = working_on(&redis, "cut").await;

    // Every client connection of the app (producer, worker, blocking fetch, pub/sub).
    let mut admin = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let killed: u64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query(&mut admin)
        .unwrap();
    assert!(killed >= 3, "killed {killed} connections");

    // The first command after the cut fails; an add with a job id is retried once, so
    // the caller sees it succeed at the first call.
    let added = q
        .add("e", "after".into(), JobOptions::new().job_id("after-1"))
        .await
        .unwrap();
    assert!(!added.duplicate);
    let started = std::time::Instant::now();
    wait_for_state(&q, "after-1", JobState::Completed, SOON).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the worker resumed after {:?}",
        started.elapsed()
    );
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn an_oversized_payload_is_refused_as_such_while_redis_is_down() {
    let mut redis = PrivateRedis::start();
    let app = QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .max_payload_bytes(1_000)
        .build()
        .await
        .unwrap();
    let used = app.queue::<String>("used").unwrap();
    used.add("e", "fits".into(), JobOptions::new())
        .await
        .unwrap();
    // A queue never used before Redis went away has no engine handle open yet.
    let unused = app.queue::<String>("unused").unwrap();
    redis.kill();

    let big = "x".repeat(2_000);
    let with_id = || JobOptions::new().job_id("big-1");
    for (what, outcome) in [
        ("add", used.add("e", big.clone(), JobOptions::new()).await),
        (
            "add with a job id",
            used.add("e", big.clone(), with_id()).await,
        ),
        (
            "add on an unopened queue",
            unused.add("e", big.clone(), JobOptions::new()).await,
        ),
    ] {
        let err = outcome.expect_err(what);
        assert!(!err.is_unavailable(), "{what}: {err:?}");
        // What an HTTP client gets: 413, its own mistake, not 503.
        let status =
            axum::response::IntoResponse::into_response(queue_axum::QueueError::from(err)).status();
        assert_eq!(status, axum::http::StatusCode::PAYLOAD_TOO_LARGE, "{what}");
    }
    let batch = used
        .add_bulk(vec![queue_core::queue::BulkJob::new("e", big.clone())])
        .await
        .expect_err("add_bulk");
    assert!(!batch.is_unavailable(), "{batch:?}");
    // A payload that fits meets the outage.
    let fits = used
        .add("e", "small".into(), JobOptions::new())
        .await
        .unwrap_err();
    assert!(fits.is_unavailable(), "{fits:?}");
}
