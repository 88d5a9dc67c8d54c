//! Leases and delays in the outbox keep the database's time, not each host's (issue #27,
//! item 9). The test plays hosts whose clocks are wrong by setting this process's clock
//! ahead or behind (`testing::skew_host_clock`), which is process-wide: this file holds
//! one test, which runs both databases one after the other.

use std::time::Duration;

use queue_core::testing::skew_host_clock;
use queue_core::{JobOptions, JobState, QueueApp};
use queue_tests::db::AnyDb;
use queue_tests::fixtures::{welcome, WelcomeEmail};
use queue_tests::{wait_until, PrivateRedis, TestRedis, SOON};

const HOUR_MS: i64 = 3_600_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_and_delays_keep_the_database_clock_whatever_the_hosts_clocks_say() {
    for db in [AnyDb::sqlite("clock").await, AnyDb::postgres("clock").await] {
        a_delay_counts_in_the_database_time(&db).await;
        a_lease_runs_out_in_the_database_time(&db).await;
        skew_host_clock(0);
    }
}

fn in_redis(redis: &TestRedis, queue: &str, id: &str) -> bool {
    redis.job_field(queue, id, "name").is_some()
}

/// A producer whose clock is an hour behind wrote the row: its delay must not count as
/// spent when a relay with the right time takes it.
async fn a_delay_counts_in_the_database_time(db: &AnyDb) {
    let redis = TestRedis::new("outbox-clock-delay");
    let app = redis
        .app(|b| {
            b.outbox(
                db.outbox()
                    .start_relay(false)
                    .poll_interval(Duration::from_millis(20)),
            )
        })
        .await;
    let email = app.queue::<WelcomeEmail>("email").unwrap();

    skew_host_clock(-HOUR_MS);
    let options = JobOptions::new()
        .job_id("delayed-1")
        .delay(Duration::from_secs(60));
    db.add_in(&email, vec![("welcome", welcome(1), options)], true)
        .await;
    skew_host_clock(0);

    let relay = app.start_relay().unwrap();
    wait_until(SOON, "the job in Redis", || async {
        in_redis(&redis, "email", "delayed-1").then_some(())
    })
    .await;
    assert_eq!(
        email.get_job_state("delayed-1").await.unwrap(),
        Some(JobState::Delayed),
        "its minute has not passed ({})",
        db.kind()
    );
    relay.shutdown().await;
}

/// A relay whose clock is an hour ahead takes a row and hangs (its Redis does not
/// answer): its lease must run out after the lease's length, not an hour later, so that
/// another relay takes the row.
async fn a_lease_runs_out_in_the_database_time(db: &AnyDb) {
    let redis = TestRedis::new("outbox-clock-lease");
    let producer = redis
        .app(|b| {
            b.outbox(
                db.outbox()
                    .start_relay(false)
                    .poll_interval(Duration::from_millis(20)),
            )
        })
        .await;
    let hung_redis = PrivateRedis::start();
    let hanging = QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", hung_redis.port()))
        .command_timeout(Duration::from_secs(120))
        .outbox(
            db.another_outbox()
                .await
                .start_relay(false)
                .lease(Duration::from_secs(2))
                .poll_interval(Duration::from_millis(20)),
        )
        .build()
        .await
        .unwrap();
    let email = producer.queue::<WelcomeEmail>("email").unwrap();
    let job = ("welcome", welcome(2), JobOptions::new().job_id("leased-1"));
    db.add_in(&email, vec![job], true).await;

    hung_redis.freeze();
    skew_host_clock(HOUR_MS);
    let stuck = hanging.start_relay().unwrap();
    let outbox = producer.outbox().unwrap();
    wait_until(SOON, "the hanging relay to take the row", || async {
        let rows = outbox.pending(10).await.unwrap();
        (rows.len() == 1 && rows[0].attempts >= 1).then_some(())
    })
    .await;
    skew_host_clock(0);

    let relay = producer.start_relay().unwrap();
    wait_until(
        SOON,
        "another relay to take the row once the 2 s lease ran out",
        || async { in_redis(&redis, "email", "leased-1").then_some(()) },
    )
    .await;
    // Counted once the batch is done, which the row's delete follows.
    wait_until(SOON, "the row to be deleted", || async {
        (outbox.counts().await.unwrap().pending == 0).then_some(())
    })
    .await;
    assert_eq!(relay.stats().added, 1, "{} {:?}", db.kind(), relay.stats());
    relay.shutdown().await;
    drop(stuck);
    drop(hanging);
}
