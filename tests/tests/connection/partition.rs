//! A partition of one process (#48): Redis stays up, and one process loses it without a
//! sound (a blackhole through `queue_tests::fault_proxy`), while the others keep it.
//! A web process keeps answering: status from the outbox where the job still waits
//! there, 503 with `Retry-After` otherwise, readiness false while cut off and true once
//! back. A worker cut off in the middle of its jobs finishes them once back, each once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use queue_axum::{job_routes, HealthRoutes, QueueLayer};
use queue_core::app::Registrations;
use queue_core::health::HealthSettings;
use queue_core::prelude::*;
use queue_tests::db::AnyDb;
use queue_tests::fault_proxy::FaultProxy;
use queue_tests::fixtures::{welcome, WelcomeEmail};
use queue_tests::http::get;
use queue_tests::{wait_until, PrivateRedis};

/// The most an answer may take while the process is cut off: the status route's wait
/// for Redis (600 ms) and the readiness probe's (1 s here), with a margin.
const PROMPT: Duration = Duration::from_millis(1500);
/// How long the process is cut off.
const CUT: Duration = Duration::from_secs(12);
/// How soon after the link's return it works again (a command timeout of silence, 2 s
/// here, then a new connection).
const BACK_WITHIN: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_process_cut_off_answers_from_the_outbox_or_503_and_is_unready_until_back() {
    let redis = PrivateRedis::start();
    let proxy = FaultProxy::start(&format!("127.0.0.1:{}", redis.port())).await;
    let db = AnyDb::sqlite("partition_web").await;
    let app = QueueApp::builder()
        .redis(proxy.url())
        .command_timeout(Duration::from_secs(2))
        .registrations(Registrations::None)
        .outbox(db.outbox().start_relay(false))
        .build()
        .await
        .expect("the web app starts");
    let email = app.queue::<WelcomeEmail>("email").expect("the queue");
    email
        .add("welcome", welcome(1), JobOptions::new().job_id("welcome-1"))
        .await
        .expect("an add before the cut");
    db.add_in(
        &email,
        vec![("welcome", welcome(2), JobOptions::new().job_id("welcome-2"))],
        true,
    )
    .await;
    let router = Router::new()
        .merge(job_routes())
        .merge(
            HealthRoutes::new(HealthSettings::new().redis_timeout(Duration::from_secs(1))).router(),
        )
        .layer(QueueLayer::new(&app));
    let addr = queue_tests::http::serve(router).await;
    assert_eq!(get(addr, "/readyz").await.status, 200);

    proxy.blackhole();
    let cut_at = Instant::now();
    while cut_at.elapsed() < CUT {
        let timed = |path: &'static str| async move {
            let started = Instant::now();
            let response = get(addr, path).await;
            (response, started.elapsed())
        };
        // Still in the outbox: what the 202 promised, from the database.
        let (pending, took) = timed("/jobs/email/welcome-2").await;
        assert_eq!(pending.status, 200);
        assert_eq!(pending.json()["state"], "pending");
        assert!(took < PROMPT, "pending took {took:?}");
        // Only Redis knows this one: unavailable, said promptly.
        let (unknown, took) = timed("/jobs/email/welcome-1").await;
        assert_eq!(unknown.status, 503);
        assert!(unknown.header("retry-after").is_some());
        assert!(took < PROMPT, "503 took {took:?}");
        let (ready, took) = timed("/readyz").await;
        assert_eq!(ready.status, 503, "ready while cut off");
        assert!(took < PROMPT, "readiness took {took:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    proxy.drop_silently();
    proxy.heal();
    wait_until(
        BACK_WITHIN,
        "readiness and the status route back",
        || async {
            let ready = get(addr, "/readyz").await.status == 200;
            let known = get(addr, "/jobs/email/welcome-1").await;
            (ready && known.status == 200 && known.json()["state"] == "waiting").then_some(())
        },
    )
    .await;
}

/// Each payload's runs.
type Runs = Arc<Mutex<HashMap<u64, u32>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cut_off_mid_jobs_finishes_them_once_back_each_once() {
    let redis = PrivateRedis::start();
    let proxy = FaultProxy::start(&format!("127.0.0.1:{}", redis.port())).await;
    // Jobs added by a producer that keeps Redis.
    let producer = QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .registrations(Registrations::None)
        .build()
        .await
        .expect("the producer starts");
    let runs: Runs = Arc::default();
    let counted = runs.clone();
    let worker = QueueApp::builder()
        .redis(proxy.url())
        .command_timeout(Duration::from_secs(2))
        .registrations(Registrations::None)
        .processor(
            Processor::new("exports")
                .concurrency(5)
                .any_job(move |job: Job<u64>| {
                    let counted = counted.clone();
                    async move {
                        tokio::time::sleep(Duration::from_millis(400)).await;
                        *counted.lock().expect("runs").entry(job.data).or_insert(0) += 1;
                        Ok::<(), JobError>(())
                    }
                }),
        )
        .build()
        .await
        .expect("the worker starts");
    let exports = producer.queue::<u64>("exports").expect("the queue");
    let total = 60;
    for n in 0..total {
        exports
            .add("export", n, JobOptions::new())
            .await
            .expect("an add");
    }
    let workers = worker.start_workers().await.expect("workers start");
    wait_until(Duration::from_secs(10), "some jobs done", || async {
        (runs.lock().expect("runs").len() >= 10).then_some(())
    })
    .await;

    // Cut off with five jobs running, for less than their locks last (30 s): what
    // they did must count, once.
    let at_cut = runs.lock().expect("runs").len();
    proxy.blackhole();
    tokio::time::sleep(CUT).await;
    let during = runs.lock().expect("runs").len();
    proxy.drop_silently();
    proxy.heal();
    wait_until(Duration::from_secs(30), "every job completed", || async {
        let counts = exports.get_job_counts().await.ok()?;
        (counts.completed == total).then_some(())
    })
    .await;
    workers.shutdown(Duration::from_secs(5)).await;
    let runs = runs.lock().expect("runs").clone();
    assert_eq!(runs.len(), usize::try_from(total).unwrap_or(usize::MAX));
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "ran more than once: {twice:?}");
    // Nothing new started while cut off: the handlers running when the cut came
    // finished, and that is all.
    assert!(
        during <= at_cut + 5,
        "{during} jobs ran by the end of the cut, {at_cut} at its start"
    );
}
