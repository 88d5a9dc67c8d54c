//! `IdempotencyLayer` over real HTTP and a real Redis, as the IETF draft "The
//! Idempotency-Key HTTP Header Field" has it: a retry with the same key gets the first
//! answer and the work runs once; the same key with another request is 422, a duplicate
//! while the first runs 409, a malformed key 400; answers a client should retry are not
//! kept; keys are per route and per caller scope, and expire.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use axum::{Json, Router};
use queue_axum::IdempotencyLayer;
use queue_core::QueueApp;
use queue_tests::http::{request, serve, HttpResponse};
use queue_tests::{wait_until, PrivateRedis, TestRedis, SOON};
use tokio::sync::Semaphore;

/// What the test routes share: how many times each ran, and a gate a slow route waits on.
#[derive(Clone)]
struct Counts {
    orders: Arc<AtomicUsize>,
    flaky: Arc<AtomicUsize>,
    slow: Arc<AtomicUsize>,
    gate: Arc<Semaphore>,
}

impl Default for Counts {
    fn default() -> Self {
        Counts {
            orders: Arc::default(),
            flaky: Arc::default(),
            slow: Arc::default(),
            // Closed until the test adds a permit.
            gate: Arc::new(Semaphore::new(0)),
        }
    }
}

async fn order(
    State(counts): State<Counts>,
    Json(body): Json<serde_json::Value>,
) -> impl IntoResponse {
    let n = counts.orders.fetch_add(1, Ordering::SeqCst) + 1;
    (
        StatusCode::CREATED,
        [("x-order", n.to_string())],
        Json(serde_json::json!({ "order": n, "item": body["item"] })),
    )
}

/// 503 the first time, 201 after.
async fn flaky(State(counts): State<Counts>) -> impl IntoResponse {
    match counts.flaky.fetch_add(1, Ordering::SeqCst) {
        0 => (StatusCode::SERVICE_UNAVAILABLE, "try again").into_response(),
        n => (
            StatusCode::CREATED,
            Json(serde_json::json!({ "run": n + 1 })),
        )
            .into_response(),
    }
}

/// Runs until the test opens the gate.
async fn slow(State(counts): State<Counts>) -> impl IntoResponse {
    counts.slow.fetch_add(1, Ordering::SeqCst);
    let _permit = counts.gate.acquire().await.expect("gate");
    (StatusCode::CREATED, "done")
}

fn routes(
    app: &QueueApp,
    counts: Counts,
    layer: impl Fn(IdempotencyLayer) -> IdempotencyLayer,
) -> Router {
    let idempotent = layer(IdempotencyLayer::new(app));
    Router::new()
        .route("/orders", post(order).get(|| async { "list" }))
        .route("/other-orders", post(order))
        .route("/flaky", post(flaky))
        .route("/slow", post(slow))
        .layer(idempotent)
        .with_state(counts)
}

/// An app on `redis` that waits 500 ms for it, for the tests where Redis goes away.
async fn impatient_app(redis: &PrivateRedis) -> QueueApp {
    QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .registrations(queue_core::app::Registrations::None)
        .command_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect("the app builds")
}

/// `POST /orders` with the key `k-1`, as the caller `header` names.
async fn order_as(addr: std::net::SocketAddr, header: &str, caller: &str) -> HttpResponse {
    request(
        addr,
        "POST",
        "/orders",
        &[
            ("content-type", "application/json"),
            ("idempotency-key", "k-1"),
            (header, caller),
        ],
        br#"{"item":"tea"}"#,
    )
    .await
    .expect("request")
}

async fn send(
    addr: std::net::SocketAddr,
    path: &str,
    key: Option<&str>,
    body: &str,
) -> HttpResponse {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(key) = key {
        headers.push(("idempotency-key", key));
    }
    request(addr, "POST", path, &headers, body.as_bytes())
        .await
        .expect("request")
}

#[tokio::test]
async fn a_retry_with_the_same_key_gets_the_first_answer_and_the_work_runs_once() {
    let redis = TestRedis::new("idem-replay");
    let app = redis.app(|b| b).await;
    let counts = Counts::default();
    let addr = serve(routes(&app, counts.clone(), |l| l)).await;

    let first = send(addr, "/orders", Some("k-1"), r#"{"item":"tea"}"#).await;
    assert_eq!(first.status, 201);
    assert_eq!(first.json(), serde_json::json!({"order": 1, "item": "tea"}));
    assert_eq!(first.header("idempotent-replayed"), None);
    for _ in 0..2 {
        let again = send(addr, "/orders", Some("k-1"), r#"{"item":"tea"}"#).await;
        assert_eq!(again.status, 201);
        assert_eq!(again.json(), first.json());
        assert_eq!(again.header("x-order"), Some("1"), "headers are kept too");
        assert_eq!(again.header("content-type"), Some("application/json"));
        assert_eq!(again.header("idempotent-replayed"), Some("true"));
    }
    assert_eq!(counts.orders.load(Ordering::SeqCst), 1);
    // The draft's form of the key, a quoted string, is the same key.
    let quoted = send(addr, "/orders", Some("\"k-1\""), r#"{"item":"tea"}"#).await;
    assert_eq!(quoted.json(), first.json());
    assert_eq!(counts.orders.load(Ordering::SeqCst), 1);
    // Another key is another request; the same key on another route too.
    let second = send(addr, "/orders", Some("k-2"), r#"{"item":"tea"}"#).await;
    assert_eq!(second.json()["order"], 2);
    let elsewhere = send(addr, "/other-orders", Some("k-1"), r#"{"item":"tea"}"#).await;
    assert_eq!(elsewhere.json()["order"], 3);
    // No key: every request runs. A GET is not kept.
    assert_eq!(
        send(addr, "/orders", None, r#"{"item":"tea"}"#)
            .await
            .json()["order"],
        4
    );
    assert_eq!(
        send(addr, "/orders", None, r#"{"item":"tea"}"#)
            .await
            .json()["order"],
        5
    );
    let list = request(addr, "GET", "/orders", &[("idempotency-key", "k-1")], b"")
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&list.body), "list");
    // Kept under the app's prefix, with a time to live.
    let mut conn = queue_tests::sync_connection();
    let keys: Vec<String> = redis
        .keys()
        .into_iter()
        .filter(|k| k.contains(":idempotency:") && !k.contains(":new-keys:"))
        .collect();
    assert_eq!(keys.len(), 3, "{keys:?}");
    for key in keys {
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut *conn).unwrap();
        assert!(ttl > 0 && ttl <= 3600 * 1000, "{key}: {ttl}");
    }
}

#[tokio::test]
async fn the_same_key_with_another_request_is_422_and_a_malformed_key_400() {
    let redis = TestRedis::new("idem-misuse");
    let app = redis.app(|b| b).await;
    let counts = Counts::default();
    let addr = serve(routes(&app, counts.clone(), |l| l)).await;

    assert_eq!(
        send(addr, "/orders", Some("k-1"), r#"{"item":"tea"}"#)
            .await
            .status,
        201
    );
    let other_body = send(addr, "/orders", Some("k-1"), r#"{"item":"coffee"}"#).await;
    assert_eq!(other_body.status, 422);
    assert_eq!(other_body.json()["error"], "Idempotency-Key reused");
    assert_eq!(counts.orders.load(Ordering::SeqCst), 1);

    let long = "k".repeat(256);
    // (A control character never gets this far: hyper refuses the request itself.)
    for key in [
        "",
        "  ",
        long.as_str(),
        "\"unterminated",
        "\"a\"b\"",
        "caf\u{e9}",
    ] {
        let response = send(addr, "/orders", Some(key), r#"{"item":"tea"}"#).await;
        assert_eq!(
            response.status,
            400,
            "{key:?}: {}",
            String::from_utf8_lossy(&response.body)
        );
        assert_eq!(
            response.json()["error"],
            "invalid Idempotency-Key",
            "{key:?}"
        );
    }
    let twice = request(
        addr,
        "POST",
        "/orders",
        &[
            ("content-type", "application/json"),
            ("idempotency-key", "k-3"),
            ("idempotency-key", "k-4"),
        ],
        br#"{"item":"tea"}"#,
    )
    .await
    .unwrap();
    assert_eq!(twice.status, 400);
    assert_eq!(counts.orders.load(Ordering::SeqCst), 1, "none of these ran");

    // Where the key is required, its absence is 400 too.
    let required = serve(routes(&app, counts.clone(), |l| l.require_key(true))).await;
    let missing = send(required, "/orders", None, r#"{"item":"tea"}"#).await;
    assert_eq!(missing.status, 400);
    assert_eq!(missing.json()["error"], "missing Idempotency-Key");
    assert_eq!(counts.orders.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_while_the_first_runs_is_409_then_gets_the_first_answer() {
    let redis = TestRedis::new("idem-inflight");
    let app = redis.app(|b| b).await;
    let counts = Counts::default();
    let addr = serve(routes(&app, counts.clone(), |l| l)).await;

    let first = tokio::spawn(async move { send(addr, "/slow", Some("k-slow"), "{}").await });
    wait_until(SOON, "the first request to start", || async {
        (counts.slow.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    // Without the layer the duplicate would wait on the gate too: bounded.
    let duplicate = tokio::time::timeout(SOON, send(addr, "/slow", Some("k-slow"), "{}"))
        .await
        .expect("the duplicate is answered while the first runs");
    assert_eq!(
        duplicate.status,
        409,
        "{}",
        String::from_utf8_lossy(&duplicate.body)
    );
    assert_eq!(duplicate.json()["error"], "request in progress");
    let retry_after: u64 = duplicate.header("retry-after").unwrap().parse().unwrap();
    // When the hold ends at the latest: held fifteen seconds at a time while the first
    // runs, not the minute a dead holder would keep it.
    assert!((1..=15).contains(&retry_after), "{retry_after}");

    counts.gate.add_permits(1);
    let first = first.await.unwrap();
    assert_eq!((first.status, first.body.as_slice()), (201, &b"done"[..]));
    let retried = send(addr, "/slow", Some("k-slow"), "{}").await;
    assert_eq!(
        (retried.status, retried.body.as_slice()),
        (201, &b"done"[..])
    );
    assert_eq!(counts.slow.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn answers_to_retry_are_not_kept_and_kept_answers_expire() {
    let redis = TestRedis::new("idem-transient");
    let app = redis.app(|b| b).await;
    let counts = Counts::default();
    let addr = serve(routes(&app, counts.clone(), |l| {
        l.ttl(Duration::from_secs(1))
    }))
    .await;

    // A 503 tells the client to retry: the retry runs.
    assert_eq!(send(addr, "/flaky", Some("k-f"), "{}").await.status, 503);
    let retried = send(addr, "/flaky", Some("k-f"), "{}").await;
    assert_eq!(retried.status, 201);
    assert_eq!(retried.json()["run"], 2);
    let replayed = send(addr, "/flaky", Some("k-f"), "{}").await;
    assert_eq!(replayed.json()["run"], 2);
    assert_eq!(counts.flaky.load(Ordering::SeqCst), 2);

    // After the time to live, the key is free again.
    wait_until(SOON, "the kept answer to expire", || async {
        let response = send(addr, "/flaky", Some("k-f"), "{}").await;
        (response.header("idempotent-replayed").is_none()).then_some(response)
    })
    .await;
    assert_eq!(counts.flaky.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn keys_are_scoped_to_the_caller_the_application_names() {
    let redis = TestRedis::new("idem-scope");
    let app = redis.app(|b| b).await;
    let counts = Counts::default();
    let addr = serve(routes(&app, counts.clone(), |l| {
        l.scope_by(|parts| {
            parts
                .headers
                .get("x-tenant")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        })
    }))
    .await;
    let as_tenant = |tenant: &'static str| order_as(addr, "x-tenant", tenant);
    let acme = as_tenant("acme").await;
    let globex = as_tenant("globex").await;
    assert_eq!(acme.json()["order"], 1);
    assert_eq!(
        globex.json()["order"],
        2,
        "another tenant never gets acme's answer"
    );
    assert_eq!(as_tenant("acme").await.json()["order"], 1);
}

#[tokio::test]
async fn with_redis_down_a_keyed_request_is_503_promptly_and_nothing_runs() {
    let mut redis = PrivateRedis::start();
    let app = impatient_app(&redis).await;
    let counts = Counts::default();
    let addr = serve(routes(&app, counts.clone(), |l| l)).await;
    assert_eq!(send(addr, "/orders", Some("k-1"), "{}").await.status, 201);
    redis.kill();
    let started = Instant::now();
    let refused = send(addr, "/orders", Some("k-2"), "{}").await;
    assert_eq!(
        refused.status,
        503,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    assert!(refused.header("retry-after").is_some());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(counts.orders.load(Ordering::SeqCst), 1);
    // Without a key, nothing needs Redis.
    assert_eq!(send(addr, "/orders", None, "{}").await.status, 201);
}

/// A request timeout of the application's, outside the layer: it drops the route's
/// future when the time is up, as `tower_http::timeout` does.
async fn time_limit(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    match tokio::time::timeout(Duration::from_millis(300), next.run(request)).await {
        Ok(response) => response,
        Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_cut_off_by_a_timeout_runs_to_its_end_and_its_retry_gets_the_answer() {
    let redis = TestRedis::new("idem-cutoff");
    let app = redis.app(|b| b).await;
    let counts = Counts::default();
    let router = routes(&app, counts.clone(), |l| l).layer(axum::middleware::from_fn(time_limit));
    let addr = serve(router).await;

    // The server's own time limit answers first; the route is still waiting.
    let cut_off = send(addr, "/slow", Some("k-cut"), "{}").await;
    assert_eq!(cut_off.status, 503);
    assert_eq!(counts.slow.load(Ordering::SeqCst), 1);
    counts.gate.add_permits(1);

    // The retry gets the answer of the run the first request started, which went on.
    let retried = wait_until(SOON, "the first run's answer", || async {
        let response = send(addr, "/slow", Some("k-cut"), "{}").await;
        (response.status != 409).then_some(response)
    })
    .await;
    assert_eq!(
        (retried.status, retried.body.as_slice()),
        (201, &b"done"[..])
    );
    assert_eq!(retried.header("idempotent-replayed"), Some("true"));
    assert_eq!(counts.slow.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_inline_app_keeps_its_keys_in_memory_so_a_unit_test_needs_no_redis() {
    let app = queue_core::QueueApp::builder()
        .registrations(queue_core::app::Registrations::None)
        .build_inline()
        .expect("an inline app builds");
    let counts = Counts::default();
    let addr = serve(routes(&app, counts.clone(), |l| l)).await;
    let first = send(addr, "/orders", Some("k-1"), r#"{"item":"tea"}"#).await;
    assert_eq!(first.status, 201);
    let again = send(addr, "/orders", Some("k-1"), r#"{"item":"tea"}"#).await;
    assert_eq!(again.status, 201);
    assert_eq!(again.json(), first.json());
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    let changed = send(addr, "/orders", Some("k-1"), r#"{"item":"cake"}"#).await;
    assert_eq!(changed.status, 422, "the same key with another request");
    assert_eq!(counts.orders.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_given_up_in_a_redis_stall_does_not_lock_out_the_retries() {
    let redis = PrivateRedis::start();
    let app = impatient_app(&redis).await;
    let counts = Counts::default();
    let addr = serve(routes(&app, counts.clone(), |l| l)).await;

    // Redis stalls (as a fork, a slow disk or a paused VM stalls it) under a keyed request:
    // our side gives up on the claim, 503; Redis runs the claim when it wakes.
    redis.freeze();
    let refused = send(addr, "/orders", Some("k-stall"), "{}").await;
    assert_eq!(
        refused.status,
        503,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    redis.thaw();
    let woke = Instant::now();

    // The client retries the same key, as the 503 told it: it runs, within moments of
    // Redis's return, instead of being told 409 for the claim's whole hold.
    let retried = wait_until(Duration::from_secs(5), "the retry to run", || async {
        let response = send(addr, "/orders", Some("k-stall"), "{}").await;
        (response.status == 201).then_some(response)
    })
    .await;
    assert_eq!(retried.json()["order"], 1);
    assert!(
        woke.elapsed() < Duration::from_secs(5),
        "{:?}",
        woke.elapsed()
    );
    assert_eq!(counts.orders.load(Ordering::SeqCst), 1);
}

/// A sign-up's answer: the token the client logs in with.
async fn sign_up() -> impl IntoResponse {
    (
        StatusCode::CREATED,
        Json(serde_json::json!({ "access_token": "tok-7d1f0c9e4b2a-secret" })),
    )
}

#[tokio::test]
async fn a_kept_answer_holds_no_secret_in_clear_and_its_retry_still_gets_it() {
    let redis = TestRedis::new("idem-sealed");
    let app = redis.app(|b| b).await;
    let router = Router::new()
        .route("/users", post(sign_up))
        .layer(IdempotencyLayer::new(&app));
    let addr = serve(router).await;
    let first = send(addr, "/users", Some("k-signup"), "{}").await;
    assert_eq!(first.json()["access_token"], "tok-7d1f0c9e4b2a-secret");

    // Everything Redis holds under the app's prefix, byte for byte.
    let mut conn = queue_tests::sync_connection();
    let keys = redis.keys();
    assert!(!keys.is_empty());
    for key in &keys {
        let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut *conn).unwrap();
        let text = String::from_utf8_lossy(&dump);
        assert!(
            !text.contains("tok-7d1f0c9e4b2a"),
            "{key} holds the token in clear"
        );
        assert!(!text.contains("k-signup"), "{key} holds the client's key");
    }
    let record = keys
        .iter()
        .find(|k| k.contains(":idempotency:") && !k.contains("new-keys"))
        .expect("the kept answer's record");
    let ttl: i64 = redis::cmd("PTTL").arg(record).query(&mut *conn).unwrap();
    assert!(
        ttl > 0 && ttl <= 3_600_000,
        "kept an hour by default, not a day: {ttl}"
    );

    let again = send(addr, "/users", Some("k-signup"), "{}").await;
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.json(), first.json());
}

#[tokio::test]
async fn a_caller_over_its_bound_of_new_keys_is_429_and_nothing_runs() {
    let redis = TestRedis::new("idem-bound");
    let app = redis.app(|b| b).await;
    let counts = Counts::default();
    let addr = serve(routes(&app, counts.clone(), |l| {
        l.max_new_keys(3, Duration::from_secs(60))
    }))
    .await;
    for n in 1..=3 {
        let key = format!("k-{n}");
        assert_eq!(send(addr, "/orders", Some(&key), "{}").await.status, 201);
    }
    let refused = send(addr, "/orders", Some("k-4"), "{}").await;
    assert_eq!(
        refused.status,
        429,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    let retry_after: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_eq!(counts.orders.load(Ordering::SeqCst), 3);
    // A retry of a kept answer is no new key; a request without a key is not bounded.
    let replayed = send(addr, "/orders", Some("k-2"), "{}").await;
    assert_eq!(replayed.header("idempotent-replayed"), Some("true"));
    assert_eq!(send(addr, "/orders", None, "{}").await.status, 201);
    // The refused key was not kept: within the next window it runs.
    let keys_after: usize = redis
        .keys()
        .iter()
        .filter(|k| k.contains(":idempotency:") && !k.contains("new-keys"))
        .count();
    assert_eq!(keys_after, 3, "{:?}", redis.keys());
}

/// Marks the request as the caller `x-user` names, as an access guard of the app's would.
async fn authenticated(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let who = request
        .headers()
        .get("x-user")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("nobody")
        .to_owned();
    request
        .extensions_mut()
        .insert(queue_axum::access::Access::read_only(who));
    next.run(request).await
}

#[tokio::test]
async fn keys_are_scoped_by_the_access_decision_without_scope_by() {
    let redis = TestRedis::new("idem-access-scope");
    let app = redis.app(|b| b).await;
    let counts = Counts::default();
    let router =
        routes(&app, counts.clone(), |l| l).layer(axum::middleware::from_fn(authenticated));
    let addr = serve(router).await;
    let as_user = |user: &'static str| order_as(addr, "x-user", user);
    assert_eq!(as_user("alice").await.json()["order"], 1);
    assert_eq!(
        as_user("bob").await.json()["order"],
        2,
        "bob never gets alice's answer"
    );
    assert_eq!(as_user("alice").await.json()["order"], 1);
}
