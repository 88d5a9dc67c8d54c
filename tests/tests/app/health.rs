//! The probes: liveness fails for a wedged worker (jobs wait, a slot is free, nothing
//! is taken) and passes for an idle, busy or paused one; readiness waits for the
//! workers; the memory guard refuses adds above its mark (503 with `Retry-After` over
//! HTTP) and reads the eviction policy at start-up.

use std::sync::mpsc;
use std::time::Duration;

use axum::routing::post;
use axum::{Json, Router};
use queue_axum::{HealthRoutes, QueueError, QueueLayer, Queues};
use queue_core::prelude::*;
use queue_core::{
    app::Registrations, health::CheckStatus, health::HealthReport, health::HealthSettings,
    health::MemoryGuard,
};
use queue_tests::db::AnyDb;
use queue_tests::http::{get, get_with, listener, post_json};
use queue_tests::logs::Logs;
use queue_tests::{wait_for_completed, wait_until, PrivateRedis, TestRedis, SOON};

/// The token that shows the probes' checks.
const OPERATOR: &str = "health-operator-token-5f1e9c";

fn check<'a>(report: &'a HealthReport, name: &str) -> &'a queue_core::health::HealthCheck {
    report
        .checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check {name} in {report:?}"))
}

/// A handler that holds its thread (not just its task) until the test lets it go.
fn blocking_handler(
    gate: std::sync::Arc<std::sync::Mutex<mpsc::Receiver<()>>>,
) -> impl Fn(Job<String>) -> futures::future::BoxFuture<'static, Result<(), JobError>>
       + Clone
       + Send
       + Sync
       + 'static {
    move |job: Job<String>| {
        let gate = gate.clone();
        Box::pin(async move {
            if job.data == "block" {
                // Blocks the runtime's only thread, the fetch loop's too.
                let _ = gate.lock().expect("gate").recv();
            }
            Ok(())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_thread_is_blocked_fails_liveness_while_jobs_wait() {
    let redis = TestRedis::new("health-wedge");
    let (release, gate) = mpsc::channel::<()>();
    let gate = std::sync::Arc::new(std::sync::Mutex::new(gate));
    let app = redis
        .app(|b| {
            b.registrations(Registrations::None).processor(
                Processor::new("wedge")
                    .concurrency(2)
                    .any_job(blocking_handler(gate)),
            )
        })
        .await;
    let q = app.queue::<String>("wedge").unwrap();
    let health = app.health(HealthSettings::new().wedged_after(Duration::from_secs(2)));

    // The workers run on a runtime of their own with one thread, as a worker process
    // with a current-thread runtime would; the probes are asked from this one.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker_app = app.clone();
    let worker_thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let workers = worker_app.start_workers().await.expect("workers start");
            let _ = stopped.await;
            workers.shutdown(SOON).await
        })
    });
    wait_until(SOON, "the worker to start", || async {
        health.ready().await.is_healthy().then_some(())
    })
    .await;

    q.add("work", "fine".to_owned(), JobOptions::new())
        .await
        .unwrap();
    wait_for_completed(&q, 1, SOON).await;
    // Idle past the period, with nothing waiting: alive (Redis was asked).
    let idle = wait_until(SOON, "the idle worker to be asked about", || async {
        let report = health.live().await;
        let worker = check(&report, "worker:wedge").clone();
        worker.detail.starts_with("idle").then_some(worker)
    })
    .await;
    assert_eq!(idle.status, CheckStatus::Pass, "{idle:?}");

    // One job blocks the worker's thread; three more wait behind it with a slot free.
    q.add("work", "block".to_owned(), JobOptions::new())
        .await
        .unwrap();
    wait_until(SOON, "the blocking job to start", || async {
        (q.get_job_counts().await.unwrap().active == 1).then_some(())
    })
    .await;
    for _ in 0..3 {
        q.add("work", "fine".to_owned(), JobOptions::new())
            .await
            .unwrap();
    }
    let wedged = wait_until(SOON, "liveness to fail", || async {
        let report = health.live().await;
        (!report.is_healthy()).then_some(report)
    })
    .await;
    let worker = check(&wedged, "worker:wedge");
    assert_eq!(worker.status, CheckStatus::Fail);
    assert!(
        worker.detail.contains("wedged: 3 jobs wait"),
        "{}",
        worker.detail
    );
    // Readiness is about serving: Redis answers and the workers started.
    assert!(health.ready().await.is_healthy());

    // Unblocked, it takes the jobs and is alive again.
    release.send(()).unwrap();
    wait_for_completed(&q, 5, SOON).await;
    assert!(health.live().await.is_healthy());
    let _ = stop.send(());
    let report = worker_thread.join().expect("the worker thread");
    assert!(report.is_clean());
    // A worker shut down is no longer asked about.
    assert!(health.live().await.checks.is_empty());
}

#[tokio::test]
async fn a_paused_queue_with_waiting_jobs_is_not_a_wedged_worker() {
    let redis = TestRedis::new("health-paused");
    let app = redis
        .app(|b| {
            b.registrations(Registrations::None).processor(
                Processor::new("paused-q")
                    .any_job(|_: Job<String>| async { Ok::<_, JobError>(()) }),
            )
        })
        .await;
    let q = app.queue::<String>("paused-q").unwrap();
    q.pause().await.unwrap();
    q.add("work", "x".to_owned(), JobOptions::new())
        .await
        .unwrap();
    let workers = app.start_workers().await.unwrap();
    let health = app.health(HealthSettings::new().wedged_after(Duration::from_millis(300)));
    let held = wait_until(SOON, "the paused queue to be asked about", || async {
        let report = health.live().await;
        let worker = check(&report, "worker:paused-q").clone();
        worker
            .detail
            .contains("held back")
            .then_some((report, worker))
    })
    .await;
    assert!(held.0.is_healthy(), "{:?}", held.0);
    assert!(held.1.detail.contains("paused"), "{}", held.1.detail);
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn readiness_waits_for_workers_that_start_when_the_app_is_ready() {
    let redis = TestRedis::new("health-ready");
    let app = redis
        .app(|b| {
            b.registrations(Registrations::None).processor(
                Processor::new("later").any_job(|_: Job<String>| async { Ok::<_, JobError>(()) }),
            )
        })
        .await;
    let health = app.health(HealthSettings::new());
    let (go, ready) = tokio::sync::oneshot::channel::<()>();
    let mut workers = app
        .start_workers_when(async move {
            let _ = ready.await;
        })
        .await
        .unwrap();
    let report = health.ready().await;
    assert!(!report.is_healthy(), "{report:?}");
    assert_eq!(check(&report, "redis").status, CheckStatus::Pass);
    let waiting = check(&report, "workers");
    assert_eq!(waiting.status, CheckStatus::Fail);
    assert!(waiting.detail.contains("later"), "{}", waiting.detail);

    go.send(()).unwrap();
    workers.started().await.unwrap();
    assert!(health.ready().await.is_healthy());
    workers.shutdown(SOON).await;
}

/// Puts one big value of `bytes` in a private Redis.
fn fill(redis: &PrivateRedis, bytes: usize) {
    let client = redis::Client::open(format!("redis://127.0.0.1:{}", redis.port())).unwrap();
    let mut conn = client.get_connection().unwrap();
    let _: () = redis::cmd("SET")
        .arg("ballast")
        .arg(vec![b'x'; bytes])
        .query(&mut conn)
        .unwrap();
}

fn drop_ballast(redis: &PrivateRedis) {
    let client = redis::Client::open(format!("redis://127.0.0.1:{}", redis.port())).unwrap();
    let mut conn = client.get_connection().unwrap();
    let _: () = redis::cmd("DEL").arg("ballast").query(&mut conn).unwrap();
}

async fn enqueue(
    Queues(app): Queues,
    Json(to): Json<String>,
) -> Result<axum::http::StatusCode, QueueError> {
    app.queue::<String>("mem")?
        .add("mail", to, JobOptions::new())
        .await?;
    Ok(axum::http::StatusCode::ACCEPTED)
}

#[tokio::test]
async fn above_the_high_water_mark_adds_fail_fast_and_http_answers_503_until_memory_falls() {
    let redis =
        PrivateRedis::start_with(&["--maxmemory", "64mb", "--maxmemory-policy", "noeviction"]);
    let metrics = queue_core::metrics::Metrics::new();
    let db = AnyDb::sqlite("health-mem").await;
    let app = QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .registrations(Registrations::None)
        .memory_guard(MemoryGuard::new().high_water(0.2))
        .metrics(metrics.clone())
        .outbox(db.outbox().poll_interval(Duration::from_millis(50)))
        .build()
        .await
        .unwrap();
    let q = app.queue::<String>("mem").unwrap();
    q.add("mail", "before".to_owned(), JobOptions::new())
        .await
        .unwrap();
    let (listener, addr) = listener().await;
    let router = Router::new()
        .route("/mail", post(enqueue))
        .merge(
            HealthRoutes::default()
                .details_for(queue_axum::access::Access::bearer(OPERATOR))
                .router(),
        )
        .layer(QueueLayer::new(&app));
    tokio::spawn(async move { axum::serve(listener, router).await });

    fill(&redis, 16 * 1024 * 1024);
    let health = app.health(HealthSettings::new());
    wait_until(SOON, "the guard to see memory above the mark", || async {
        let report = health.ready().await;
        (check(&report, "memory").status == CheckStatus::Fail).then_some(())
    })
    .await;
    let refused = q
        .add("mail", "during".to_owned(), JobOptions::new())
        .await
        .unwrap_err();
    let queue_core::Error::RedisMemoryHigh { used, max, .. } = refused else {
        panic!("refused for another reason: {refused}")
    };
    assert!(
        used >= max / 5 && max == 64 * 1024 * 1024,
        "{used} of {max}"
    );
    let response = post_json(addr, "/mail", &[], &serde_json::json!("during")).await;
    assert_eq!(response.status, 503);
    assert_eq!(response.header("retry-after"), Some("5"));
    // A stranger gets the verdict; the operator what was seen.
    let ready = get(addr, "/readyz").await;
    assert_eq!(ready.status, 503);
    assert_eq!(ready.json(), serde_json::json!({ "status": "fail" }));
    let ready = get_with(
        addr,
        "/readyz",
        &[("authorization", &format!("Bearer {OPERATOR}"))],
    )
    .await;
    assert_eq!(ready.status, 503);
    let memory = ready.json()["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "memory")
        .cloned()
        .unwrap();
    assert_eq!(memory["status"], "fail", "{memory}");
    assert_eq!(get(addr, "/livez").await.status, 200);
    let scraped = metrics.render(&app).await.unwrap();
    assert!(scraped.contains("queue_redis_memory_high 1"), "{scraped}");
    // A job written in the application's transaction waits in the outbox meanwhile.
    db.add_in(
        &q,
        vec![(
            "mail",
            "held".to_owned(),
            JobOptions::new().job_id("held-1"),
        )],
        true,
    )
    .await;
    let outbox = app.outbox().unwrap();
    let before = app.relay_stats().unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await; // a relay pass would take 50 ms
    assert_eq!(outbox.counts().await.unwrap().pending, 1, "the row is held");
    assert_eq!(app.relay_stats().unwrap(), before, "the relay took nothing");
    assert!(
        scraped.contains("queue_redis_memory_max_bytes 67108864"),
        "{scraped}"
    );

    drop_ballast(&redis);
    wait_until(SOON, "adds to be accepted again", || async {
        q.add("mail", "after".to_owned(), JobOptions::new())
            .await
            .ok()
    })
    .await;
    assert_eq!(
        post_json(addr, "/mail", &[], &serde_json::json!("after"))
            .await
            .status,
        202
    );
    assert_eq!(get(addr, "/readyz").await.status, 200);
    let scraped = metrics.render(&app).await.unwrap();
    assert!(scraped.contains("queue_redis_memory_high 0"), "{scraped}");
    // The held row is relayed once memory falls.
    wait_until(SOON, "the held row to be relayed", || async {
        q.get_job_state("held-1").await.ok().flatten()
    })
    .await;
    wait_until(SOON, "the relayed row to be deleted", || async {
        (outbox.counts().await.ok()?.pending == 0).then_some(())
    })
    .await;
    // Nothing was half-added while refused.
    assert_eq!(q.get_job_counts().await.unwrap().waiting, 4);
}

#[tokio::test]
async fn an_evicting_policy_is_logged_as_an_error_or_refused_when_required() {
    let redis =
        PrivateRedis::start_with(&["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"]);
    let url = format!("redis://127.0.0.1:{}", redis.port());
    let refused = QueueApp::builder()
        .redis(url.clone())
        .registrations(Registrations::None)
        .memory_guard(MemoryGuard::new().require_noeviction(true))
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, queue_core::Error::EvictionPolicy { policy, .. } if policy == "allkeys-lru"),
        "{refused}"
    );
    assert!(refused.to_string().contains("noeviction"), "{refused}");

    let logs = Logs::default();
    let app = {
        let _capture = logs.capture();
        QueueApp::builder()
            .redis(url)
            .registrations(Registrations::None)
            .build()
            .await
            .unwrap()
    };
    let errors = logs.at(tracing::Level::ERROR);
    assert!(
        errors.iter().any(|e| e.fields.contains("allkeys-lru")
            && e.fields.contains("CONFIG SET maxmemory-policy noeviction")),
        "{errors:?}"
    );
    let report = app.health(HealthSettings::new()).ready().await;
    assert_eq!(report.status, CheckStatus::Warn, "{report:?}");
    assert!(report.is_healthy());
}

#[test]
fn a_bad_high_water_mark_is_refused_before_connecting() {
    let err = QueueApp::builder()
        .registrations(Registrations::None)
        .memory_guard(MemoryGuard::new().high_water(1.5))
        .check()
        .unwrap_err();
    assert!(err.to_string().contains("high_water"), "{err}");
}

#[tokio::test]
async fn readiness_fails_while_the_outbox_relay_lags() {
    let redis = TestRedis::new("health-lag");
    let db = AnyDb::postgres("health-lag").await;
    // No relay in this app: its rows wait, as when every relay is down.
    let app = redis
        .app(|b| {
            b.registrations(Registrations::None)
                .outbox(db.outbox().start_relay(false))
        })
        .await;
    let q = app.queue::<String>("lagging").unwrap();
    let health = app.health(HealthSettings::new().relay_lag(Duration::from_millis(500)));
    let report = health.ready().await;
    assert_eq!(
        check(&report, "outbox").status,
        CheckStatus::Pass,
        "{report:?}"
    );
    db.add_in(&q, vec![("x", "late".to_owned(), JobOptions::new())], true)
        .await;
    let lagging = wait_until(SOON, "readiness to fail for the relay's lag", || async {
        let report = health.ready().await;
        (!report.is_healthy()).then_some(report)
    })
    .await;
    let outbox = check(&lagging, "outbox");
    assert_eq!(outbox.status, CheckStatus::Fail);
    assert!(
        outbox.detail.contains("the relay lags: 1 rows wait"),
        "{}",
        outbox.detail
    );

    // A relay catches up: ready again.
    let relay = app.start_relay().unwrap();
    wait_until(SOON, "readiness once the relay caught up", || async {
        health.ready().await.is_healthy().then_some(())
    })
    .await;
    relay.shutdown().await;
}
