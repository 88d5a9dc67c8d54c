//! The axum layer end to end, over real HTTP: 202 Accepted, idempotency, job status,
//! rejections, Redis down, graceful shutdown, and the trace id from request to job.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::response::IntoResponse;
use axum::routing::post;
use axum::{Json, Router};
#[allow(deprecated)]
use queue_axum::QueueHandle;
use queue_axum::{job_routes, Accepted, IdempotencyKey, JobRoutes, QueueError, QueueLayer};
use queue_core::prelude::*;
use queue_core::{app::Registrations, inject_queue, options::Schedule, processor};
use queue_tests::http::{get, get_with, listener, post_json, request};
use queue_tests::{wait_for_state, wait_until, PrivateRedis, TestRedis, SOON};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Welcome {
    user_id: u64,
    to: String,
    #[serde(default)]
    work_ms: u64,
    #[serde(default)]
    fail: bool,
}

static TRACES: Mutex<Vec<(String, Option<String>)>> = Mutex::new(Vec::new());

#[processor("ax-email", concurrency = 4, job = "welcome")]
async fn send_welcome(job: Job<Welcome>) -> Result<String, JobError> {
    TRACES
        .lock()
        .unwrap()
        .push((job.id().to_owned(), job.trace_id().map(str::to_owned)));
    job.update_progress(50).await?;
    tokio::time::sleep(Duration::from_millis(job.data.work_ms)).await;
    if job.data.fail {
        return Err(JobError::unrecoverable(std::io::Error::other(
            "mailbox full",
        )));
    }
    Ok(format!("sent to {}", job.data.to))
}

#[inject_queue(axum)]
struct EmailService {
    #[queue("ax-email")]
    email: Queue<Welcome>,
}

// The deprecated way to name a queue by a type: it works while it is deprecated.
#[allow(deprecated)]
mod by_marker {
    queue_axum::queue_name!(pub EmailQueue = "ax-email");
}
use by_marker::EmailQueue;

/// The five-line handler the issue asks for.
async fn signup(
    svc: EmailService,
    key: IdempotencyKey,
    headers: axum::http::HeaderMap,
    Json(w): Json<Welcome>,
) -> Result<Accepted, QueueError> {
    // The tenant stands for what the application authenticated the request as.
    let tenant = headers
        .get("x-tenant")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none");
    let id = key
        .job_id(&format!("{tenant}/signup"), "welcome")
        .unwrap_or_else(|| format!("welcome-{}", w.user_id));
    let user_id = w.user_id;
    let job = svc
        .email
        .add("welcome", w, JobOptions::new().job_id(id).attempts(3))
        .await?;
    Ok(Accepted::from(job).with("userId", user_id))
}

#[allow(deprecated)]
async fn signup_by_handle(
    email: QueueHandle<Welcome, EmailQueue>,
    Json(w): Json<Welcome>,
) -> Result<Accepted, QueueError> {
    Ok(email.add("welcome", w, JobOptions::new()).await?.into())
}

/// The operator's token of these tests.
const ADMIN: &str = "test-admin-token";

/// An access check of the application's own: the status route with details is
/// mounted behind it.
async fn operator_only(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let authorized = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {ADMIN}"));
    if authorized {
        next.run(request).await
    } else {
        axum::http::StatusCode::UNAUTHORIZED.into_response()
    }
}

fn routes() -> Router {
    let admin = JobRoutes::new()
        .include_data(true)
        .include_failed_reason(true)
        .include_return_value(true)
        .router()
        .layer(axum::middleware::from_fn(operator_only));
    Router::new()
        .route("/signup", post(signup))
        .route("/signup-by-handle", post(signup_by_handle))
        .merge(job_routes())
        .nest("/admin", admin)
}

fn only_email() -> Registrations {
    Registrations::Queues(vec!["ax-email".into()])
}

fn welcome(user_id: u64) -> serde_json::Value {
    serde_json::json!({"userId": user_id, "to": format!("u{user_id}@example.com")})
}

async fn serve(app: &QueueApp) -> std::net::SocketAddr {
    let (listener, addr) = listener().await;
    let router = routes().layer(QueueLayer::new(app));
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

#[tokio::test]
async fn signup_answers_202_with_the_job_and_where_to_look() {
    let redis = TestRedis::new("ax-202");
    let app = redis.app(|b| b.registrations(only_email())).await;
    let addr = serve(&app).await;

    let response = post_json(addr, "/signup", &[], &welcome(42)).await;
    assert_eq!(response.status, 202);
    assert_eq!(
        response.header("location"),
        Some("/jobs/ax-email/welcome-42")
    );
    assert_eq!(
        response.json(),
        serde_json::json!({"queue": "ax-email", "jobId": "welcome-42", "state": "waiting", "duplicate": false, "userId": 42})
    );
    let email = app.queue::<Welcome>("ax-email").unwrap();
    let stored = email
        .get_job("welcome-42")
        .await
        .unwrap()
        .expect("the job is in Redis");
    assert_eq!(stored.data["to"], "u42@example.com");
    assert_eq!(stored.max_attempts, 3);

    let by_handle = post_json(addr, "/signup-by-handle", &[], &welcome(7)).await;
    assert_eq!(by_handle.status, 202);
    assert!(email
        .get_job(by_handle.json()["jobId"].as_str().unwrap())
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn a_retried_request_with_the_same_idempotency_key_gets_the_same_job() {
    let redis = TestRedis::new("ax-idem");
    let app = redis.app(|b| b.registrations(only_email())).await;
    let addr = serve(&app).await;
    let key = [("idempotency-key", "7c1d-retry")];

    let tenant_a = [("idempotency-key", "7c1d-retry"), ("x-tenant", "acme")];
    let tenant_b = [("idempotency-key", "7c1d-retry"), ("x-tenant", "globex")];
    let first = post_json(addr, "/signup", &tenant_a, &welcome(1)).await;
    let again = post_json(addr, "/signup", &tenant_a, &welcome(1)).await;
    assert_eq!((first.status, again.status), (202, 202));
    let job_id = first.json()["jobId"].as_str().unwrap().to_owned();
    assert!(job_id.starts_with("welcome-"), "{job_id}");
    assert_eq!(again.json()["jobId"], job_id.as_str());
    assert_eq!(first.json()["duplicate"], false);
    assert_eq!(again.json()["duplicate"], true);
    // Another tenant that happens to send the same key gets a job of its own, and
    // not the first tenant's Location.
    let other = post_json(addr, "/signup", &tenant_b, &welcome(2)).await;
    assert_eq!(other.json()["duplicate"], false);
    assert_ne!(other.json()["jobId"], job_id.as_str());
    assert_ne!(other.header("location"), first.header("location"));
    let counts = app
        .queue::<Welcome>("ax-email")
        .unwrap()
        .get_job_counts()
        .await
        .unwrap();
    assert_eq!(counts.waiting, 2);
    let _ = key;

    let empty = post_json(addr, "/signup", &[("idempotency-key", "  ")], &welcome(1)).await;
    assert_eq!(empty.status, 400);
}

#[tokio::test]
async fn the_status_route_follows_a_job_through_its_states_without_its_payload() {
    let redis = TestRedis::new("ax-status");
    let app = redis.app(|b| b.registrations(only_email())).await;
    let addr = serve(&app).await;
    let email = app.queue::<Welcome>("ax-email").unwrap();

    let slow = serde_json::json!({"userId": 1, "to": "slow@example.com", "workMs": 800});
    let failing = serde_json::json!({"userId": 2, "to": "full@example.com", "fail": true});
    post_json(addr, "/signup", &[], &slow).await;
    post_json(addr, "/signup", &[], &failing).await;

    let waiting = get(addr, "/jobs/ax-email/welcome-1").await;
    assert_eq!(waiting.status, 200);
    assert_eq!(waiting.json()["state"], "waiting");
    assert!(
        waiting.json().get("data").is_none(),
        "no payload: it can hold personal data"
    );

    let workers = app.start_workers().await.unwrap();
    // The handler reports 50% first thing and then works for 800 ms.
    let active = wait_until(SOON, "the route to show progress 50", || async {
        let body = get(addr, "/jobs/ax-email/welcome-1").await.json();
        (body["progress"] == 50).then_some(body)
    })
    .await;
    assert_eq!(active["state"], "active");

    wait_for_state(&email, "welcome-1", JobState::Completed, SOON).await;
    wait_for_state(&email, "welcome-2", JobState::Failed, SOON).await;
    let done = get(addr, "/jobs/ax-email/welcome-1").await.json();
    assert_eq!(done["state"], "completed");
    assert_eq!(done["attemptsMade"], 1);
    assert!(done["finishedOn"].as_u64().unwrap() >= done["processedOn"].as_u64().unwrap());
    let failed = get(addr, "/jobs/ax-email/welcome-2").await.json();
    assert_eq!(failed["state"], "failed");
    // By default neither the result (personal data) nor the failure's text (internals).
    for body in [&done, &failed] {
        assert!(
            body.get("returnValue").is_none() && body.get("failedReason").is_none(),
            "{body}"
        );
    }
    // Behind an access check, the opt-ins show them.
    let admin = format!("Bearer {ADMIN}");
    assert_eq!(
        get(addr, "/admin/jobs/ax-email/welcome-1").await.status,
        401
    );
    let detailed = get_with(
        addr,
        "/admin/jobs/ax-email/welcome-1",
        &[("authorization", &admin)],
    )
    .await
    .json();
    assert_eq!(detailed["returnValue"], "sent to slow@example.com");
    assert_eq!(detailed["data"]["to"], "slow@example.com");
    let detailed = get_with(
        addr,
        "/admin/jobs/ax-email/welcome-2",
        &[("authorization", &admin)],
    )
    .await
    .json();
    assert_eq!(detailed["failedReason"], "mailbox full");

    let missing_job = get(addr, "/jobs/ax-email/welcome-999").await;
    assert_eq!(missing_job.status, 404);
    assert_eq!(missing_job.json()["error"], "job not found");
    let missing_queue = get(addr, "/jobs/not-a-queue/welcome-1").await;
    assert_eq!(missing_queue.status, 404);
    assert_eq!(missing_queue.json()["error"], "unknown queue");
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn lookups_of_keys_that_are_not_jobs_answer_404_never_503() {
    let redis = TestRedis::new("ax-hostile");
    let app = redis.app(|b| b.registrations(only_email())).await;
    let addr = serve(&app).await;
    let email = app.queue::<Welcome>("ax-email").unwrap();
    email
        .add(
            "welcome",
            serde_json::from_value(welcome(1)).unwrap(),
            JobOptions::new().job_id("welcome-1"),
        )
        .await
        .unwrap();
    email
        .upsert_scheduler(
            "daily",
            Schedule::every(Duration::from_secs(3600)),
            "welcome",
            serde_json::from_value(welcome(2)).unwrap(),
            JobOptions::new(),
        )
        .await
        .unwrap();
    // The queue's own keys (hashes, lists, sets, streams), keys beside a job's, and
    // ids no job can have: all "no such job", none a made-up job or a 503.
    let long = "x".repeat(600);
    for id in [
        "meta",
        "events",
        "id",
        "wait",
        "active",
        "completed",
        "failed",
        "delayed",
        "marker",
        "stalled-check",
        "repeat",
        "de",
        "metrics",
        "welcome-1%3Alogs",
        "welcome-1%3Ax",
        "repeat%3Adaily",
        "..%2F..%2Fmeta",
        long.as_str(),
    ] {
        let response = get(addr, &format!("/jobs/ax-email/{id}")).await;
        assert_eq!(
            response.status,
            404,
            "{id:.40}: {}",
            String::from_utf8_lossy(&response.body)
        );
        assert_eq!(response.json()["error"], "job not found", "{id:.40}");
        // The answer quotes a bounded piece of the id, not all of it.
        assert!(
            response.body.len() < 300,
            "{id:.40}: {} bytes",
            response.body.len()
        );
    }
    assert_eq!(get(addr, "/jobs/ax-email/welcome-1").await.status, 200);
}

#[tokio::test]
async fn the_status_route_serves_only_the_queues_it_is_given() {
    let redis = TestRedis::new("ax-listed");
    let app = redis.app(|b| b.registrations(only_email())).await;
    app.queue::<Welcome>("ax-email")
        .unwrap()
        .add(
            "welcome",
            serde_json::from_value(welcome(1)).unwrap(),
            JobOptions::new().job_id("welcome-1"),
        )
        .await
        .unwrap();
    let (listener, addr) = listener().await;
    let router = JobRoutes::new()
        .queues(["ax-other"])
        .router()
        .layer(QueueLayer::new(&app));
    tokio::spawn(async move { axum::serve(listener, router).await });
    let response = get(addr, "/jobs/ax-email/welcome-1").await;
    assert_eq!(
        (response.status, response.json()["error"].clone()),
        (404, serde_json::json!("unknown queue"))
    );
}

#[tokio::test]
async fn a_router_without_the_layer_answers_500_naming_it() {
    let (listener, addr) = listener().await;
    tokio::spawn(async move { axum::serve(listener, routes()).await });
    let response = post_json(addr, "/signup", &[], &welcome(1)).await;
    assert_eq!(response.status, 500);
    assert!(response.json()["message"]
        .as_str()
        .unwrap()
        .contains("QueueLayer::new(&app)"));
    assert_eq!(get(addr, "/jobs/ax-email/welcome-1").await.status, 500);
}

#[tokio::test]
async fn redis_down_answers_503_with_retry_after_quickly() {
    let mut redis = PrivateRedis::start();
    let app = QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .registrations(only_email())
        .build()
        .await
        .unwrap();
    let addr = serve(&app).await;
    assert_eq!(
        post_json(addr, "/signup", &[], &welcome(1)).await.status,
        202
    );

    redis.kill();
    let started = Instant::now();
    let response = post_json(addr, "/signup", &[], &welcome(2)).await;
    assert_eq!(
        response.status,
        503,
        "{:?}",
        String::from_utf8_lossy(&response.body)
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(response.header("retry-after"), Some("5"));
    assert_eq!(response.json()["error"], "queue unavailable");
}

#[tokio::test]
async fn shutdown_finishes_the_active_job_and_refuses_new_requests() {
    let redis = TestRedis::new("ax-shutdown");
    let app = redis.app(|b| b.registrations(only_email())).await;
    let workers = app.start_workers().await.unwrap();
    let (listener, addr) = listener().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(queue_axum::serve_until(
        listener,
        routes().layer(QueueLayer::new(&app)),
        Some(workers),
        SOON,
        async move {
            let _ = stopped.await;
        },
    ));

    let slow = serde_json::json!({"userId": 5, "to": "slow@example.com", "workMs": 700});
    assert_eq!(post_json(addr, "/signup", &[], &slow).await.status, 202);
    let email = app.queue::<Welcome>("ax-email").unwrap();
    wait_for_state(&email, "welcome-5", JobState::Active, SOON).await;

    stop.send(()).unwrap();
    wait_until(SOON, "the listener to close", || async {
        request(addr, "GET", "/jobs/ax-email/welcome-5", &[], b"")
            .await
            .is_err()
            .then_some(())
    })
    .await;
    let report = server
        .await
        .unwrap()
        .unwrap()
        .expect("workers were stopped");
    assert!(report.is_clean());
    assert_eq!(
        email.get_job_state("welcome-5").await.unwrap(),
        Some(JobState::Completed)
    );
    assert_eq!(email.get_job_counts().await.unwrap().active, 0);
}

#[tokio::test]
async fn the_request_trace_reaches_the_processor_in_bullmq_telemetry() {
    let redis = TestRedis::new("ax-trace");
    let app = redis.app(|b| b.registrations(only_email())).await;
    let addr = serve(&app).await;
    let workers = app.start_workers().await.unwrap();

    let response = post_json(
        addr,
        "/signup",
        &[("x-request-id", "req-abc123")],
        &welcome(77),
    )
    .await;
    assert_eq!(response.header("x-request-id"), Some("req-abc123"));
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    post_json(
        addr,
        "/signup",
        &[("traceparent", traceparent)],
        &welcome(78),
    )
    .await;
    let generated = post_json(addr, "/signup", &[], &welcome(79)).await;
    let generated_id = generated.header("x-request-id").unwrap().to_owned();

    let email = app.queue::<Welcome>("ax-email").unwrap();
    for id in ["welcome-77", "welcome-78", "welcome-79"] {
        wait_for_state(&email, id, JobState::Completed, SOON).await;
    }
    let traces = TRACES.lock().unwrap().clone();
    let trace_of = |id: &str| {
        traces
            .iter()
            .find(|(j, _)| j == id)
            .and_then(|(_, t)| t.clone())
            .unwrap_or_else(|| panic!("{id} ran untraced: {traces:?}"))
    };
    // A request id is echoed and logged, not a trace id: the request starts a trace.
    let with_request_id = trace_of("welcome-77");
    assert_eq!(with_request_id.len(), 32, "{with_request_id}");
    assert_ne!(with_request_id, "req-abc123");
    // A traceparent is continued: same trace, and the job hangs below the request.
    assert_eq!(trace_of("welcome-78"), "4bf92f3577b34da6a3ce929d0e0e4736");
    let opts: serde_json::Value =
        serde_json::from_str(&redis.job_field("ax-email", "welcome-78", "opts").unwrap()).unwrap();
    let carried: serde_json::Value =
        serde_json::from_str(opts["tm"].as_str().expect("tm is BullMQ's telemetry field")).unwrap();
    let stored = carried["traceparent"].as_str().unwrap();
    assert!(
        stored.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-") && stored != traceparent,
        "{stored}"
    );
    // A request without either gets a trace, whose id it is told.
    assert_eq!(trace_of("welcome-79"), generated_id);
    // Nothing is stored besides BullMQ's own keys.
    assert!(
        redis.keys().iter().all(|k| !k.ends_with(":x")),
        "{:?}",
        redis.keys()
    );
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn a_layer_that_starts_no_traces_leaves_untraced_requests_and_their_jobs_untraced() {
    let redis = TestRedis::new("ax-nomint");
    let app = redis.app(|b| b.registrations(only_email())).await;
    let (listener, addr) = listener().await;
    let router = routes().layer(QueueLayer::new(&app).start_traces(false));
    tokio::spawn(async move { axum::serve(listener, router).await });

    let untraced = post_json(addr, "/signup", &[], &welcome(80)).await;
    assert_eq!(untraced.status, 202);
    assert_eq!(untraced.header("x-request-id"), None);
    let traced = post_json(addr, "/signup", &[("x-request-id", "req-81")], &welcome(81)).await;
    assert_eq!(traced.header("x-request-id"), Some("req-81"));

    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let continued = post_json(
        addr,
        "/signup",
        &[("traceparent", traceparent)],
        &welcome(82),
    )
    .await;
    assert_eq!(continued.status, 202);

    // A request id alone starts no trace: only the job whose request brought a
    // traceparent carries one, in BullMQ's telemetry field.
    let opts = |id: &str| -> serde_json::Value {
        serde_json::from_str(&redis.job_field("ax-email", id, "opts").unwrap()).unwrap()
    };
    for untraced in ["welcome-80", "welcome-81"] {
        assert_eq!(opts(untraced).get("tm"), None, "{untraced}");
    }
    assert!(opts("welcome-82")["tm"]
        .as_str()
        .unwrap()
        .contains("4bf92f3577b34da6a3ce929d0e0e4736"));
}

#[tokio::test]
async fn a_route_behind_the_idempotency_layer_keeps_the_request_trace() {
    // The idempotency layer runs its route on a task of its own; the request's trace
    // must go with it, or the jobs of every idempotent route start untraced.
    let redis = TestRedis::new("ax-idem-trace");
    let app = redis.app(|b| b.registrations(only_email())).await;
    let (listener, addr) = listener().await;
    let router = Router::new()
        .route(
            "/signup",
            post(signup).layer(queue_axum::IdempotencyLayer::new(&app)),
        )
        .layer(QueueLayer::new(&app));
    tokio::spawn(async move { axum::serve(listener, router).await });

    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let response = post_json(
        addr,
        "/signup",
        &[("traceparent", traceparent), ("idempotency-key", "k-83")],
        &welcome(83),
    )
    .await;
    assert_eq!(response.status, 202, "{:?}", response.json());
    let id = response.json()["jobId"].as_str().unwrap().to_owned();
    let opts: serde_json::Value =
        serde_json::from_str(&redis.job_field("ax-email", &id, "opts").unwrap()).unwrap();
    let carried = opts["tm"]
        .as_str()
        .unwrap_or_else(|| panic!("untraced: {opts}"));
    assert!(
        carried.contains("4bf92f3577b34da6a3ce929d0e0e4736"),
        "{carried}"
    );
}

#[tokio::test]
async fn a_job_with_a_megabyte_name_answers_a_status_of_its_usual_size() {
    let redis = TestRedis::new("ax-long-name");
    let app = redis.app(|b| b.registrations(only_email())).await;
    // Written as another producer could: a name of a megabyte of quotes, which JSON
    // would escape into two.
    let name = "\"".repeat(1024 * 1024);
    app.queue::<Welcome>("ax-email")
        .unwrap()
        .add(
            &name,
            serde_json::from_value(welcome(1)).unwrap(),
            JobOptions::new().job_id("welcome-long"),
        )
        .await
        .unwrap();
    let addr = serve(&app).await;
    let response = get(addr, "/jobs/ax-email/welcome-long").await;
    assert_eq!(response.status, 200);
    assert!(response.body.len() < 4096, "{} bytes", response.body.len());
    let shown = response.json()["name"].as_str().unwrap().to_owned();
    assert!(
        shown.starts_with("\"\"\"") && shown.ends_with('…'),
        "{shown}"
    );
}
