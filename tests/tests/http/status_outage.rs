//! The status route while Redis is down, on SQLite and PostgreSQL: a job still in the
//! outbox answers `pending` (what a 202's `Location` promised), any other job a 503 with
//! `Retry-After`, and either answer comes within a second, not after the queue calls'
//! command timeouts one after another.

use std::time::{Duration, Instant};

use queue_axum::{job_routes, QueueLayer};
use queue_core::{JobOptions, QueueApp};
use queue_tests::db::AnyDb;
use queue_tests::fixtures::{welcome, WelcomeEmail};
use queue_tests::http::{get, listener};
use queue_tests::PrivateRedis;

/// Declares one test per database for a scenario `async fn(AnyDb)`.
macro_rules! on_both {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $scenario() {
                super::$scenario(queue_tests::db::AnyDb::sqlite(stringify!($scenario)).await).await;
            })*
        }
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $scenario() {
                super::$scenario(queue_tests::db::AnyDb::postgres(stringify!($scenario)).await).await;
            })*
        }
    };
}

on_both!(with_redis_down_a_job_in_the_outbox_answers_pending_within_a_second);

/// The most a status answer may take with Redis down.
const PROMPT: Duration = Duration::from_secs(1);

async fn with_redis_down_a_job_in_the_outbox_answers_pending_within_a_second(db: AnyDb) {
    let mut redis = PrivateRedis::start();
    // The default command timeout (3 s): the route must not wait it out.
    let app = QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .registrations(queue_core::app::Registrations::None)
        .outbox(db.outbox().start_relay(false))
        .build()
        .await
        .unwrap();
    let email = app.queue::<WelcomeEmail>("email").unwrap();
    // One job reached Redis before the outage; one waits in the outbox (no relay runs).
    email
        .add("welcome", welcome(1), JobOptions::new().job_id("welcome-1"))
        .await
        .unwrap();
    db.add_in(
        &email,
        vec![("welcome", welcome(2), JobOptions::new().job_id("welcome-2"))],
        true,
    )
    .await;
    let (listener, addr) = listener().await;
    let router = job_routes().layer(QueueLayer::new(&app));
    tokio::spawn(async move { axum::serve(listener, router).await });
    assert_eq!(
        get(addr, "/jobs/email/welcome-2").await.json()["state"],
        "pending"
    );
    assert_eq!(
        get(addr, "/jobs/email/welcome-1").await.json()["state"],
        "waiting"
    );

    redis.kill();
    for _ in 0..2 {
        let started = Instant::now();
        let pending = get(addr, "/jobs/email/welcome-2").await;
        let took = started.elapsed();
        assert_eq!(
            pending.status,
            200,
            "{}: {}",
            db.kind(),
            String::from_utf8_lossy(&pending.body)
        );
        assert_eq!(pending.json()["state"], "pending", "{}", db.kind());
        assert_eq!(pending.json()["id"], "welcome-2");
        assert!(took < PROMPT, "{}: pending took {took:?}", db.kind());

        // Only Redis knows this one: unavailable, said promptly.
        let started = Instant::now();
        let unknown = get(addr, "/jobs/email/welcome-1").await;
        let took = started.elapsed();
        assert_eq!(unknown.status, 503, "{}", db.kind());
        assert_eq!(unknown.header("retry-after"), Some("5"));
        assert!(took < PROMPT, "{}: 503 took {took:?}", db.kind());
    }

    // Redis back (empty): the route reads Redis again.
    redis.restart();
    queue_tests::wait_until(
        Duration::from_secs(20),
        "the status route to read Redis again",
        || async {
            email
                .add("welcome", welcome(3), JobOptions::new().job_id("welcome-3"))
                .await
                .ok()?;
            let response = get(addr, "/jobs/email/welcome-3").await;
            (response.json()["state"] == "waiting").then_some(())
        },
    )
    .await;
}
