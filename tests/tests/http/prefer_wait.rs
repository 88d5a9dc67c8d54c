//! `Prefer: wait=N` over real HTTP: a job finished in time is answered with its status
//! (or a 303 to it), one that is not with the 202 of today, a failed one with its
//! failed state; a client that leaves ends its wait.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::{Json, Router};
use queue_axum::{Accepted, IdempotencyLayer, JobRoutes, PreferWaitLayer, QueueError, QueueLayer};
use queue_core::app::Registrations;
use queue_core::prelude::*;
use queue_core::QueueApp;
use queue_tests::http::{post_json, request};
use queue_tests::{wait_until, TestRedis, SOON};
use tokio::io::AsyncWriteExt;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Mail {
    to: String,
    #[serde(default)]
    work_ms: u64,
    #[serde(default)]
    fail: bool,
}

#[job_queue("pw-mail")]
enum Mailer {
    #[job("welcome", output = String)]
    Welcome(Mail),
}

#[processor(Mailer, concurrency = 8)]
async fn send(job: Job<Mail>) -> Result<String, JobError> {
    tokio::time::sleep(Duration::from_millis(job.data.work_ms)).await;
    if job.data.fail {
        return Err(JobError::unrecoverable(std::io::Error::other(
            "mailbox full",
        )));
    }
    Ok(format!("sent to {}", job.data.to))
}

#[inject_queue]
struct Producers {
    mail: Queue<Mailer>,
}

/// A 202 that carries what the client gets only once, with a header saying so.
async fn sign_up(
    producers: Producers,
    Json(mail): Json<Mail>,
) -> Result<impl axum::response::IntoResponse, QueueError> {
    let job = producers.mail.add_job(mail, JobOptions::new()).await?;
    let accepted = Accepted::from(job)
        .with("accessToken", "secret-once")
        .with("state", "not the status's");
    Ok(([(axum::http::header::CACHE_CONTROL, "no-store")], accepted))
}

/// The app's router: `/users` waits up to 5 s and shows the return value; `/quiet`
/// waits up to 5 s with the default status (no return value); `/see-other` answers
/// 303.
async fn serve(app: &QueueApp) -> SocketAddr {
    let shows_results = JobRoutes::new().include_return_value(true);
    let router = Router::new()
        .route("/users", post(sign_up))
        .layer(PreferWaitLayer::new(Duration::from_secs(5)).status(shows_results))
        .merge(
            Router::new()
                .route("/quiet", post(sign_up))
                .layer(PreferWaitLayer::new(Duration::from_secs(5))),
        )
        .merge(
            Router::new()
                .route("/see-other", post(sign_up))
                .layer(PreferWaitLayer::new(Duration::from_secs(5)).see_other(true)),
        )
        .merge(
            // The wait outside the idempotency layer, which runs the route on a task
            // of its own.
            Router::new()
                .route("/idempotent", post(sign_up))
                .layer(IdempotencyLayer::new(app))
                .layer(PreferWaitLayer::new(Duration::from_secs(5))),
        )
        .merge(JobRoutes::new().router())
        .layer(QueueLayer::new(app));
    let addr = queue_tests::http::serve(router).await;
    addr
}

fn mail(work_ms: u64, fail: bool) -> serde_json::Value {
    serde_json::json!({"to": "ada@example.com", "workMs": work_ms, "fail": fail})
}

#[tokio::test]
async fn a_job_finished_in_time_is_answered_with_its_status() {
    let redis = TestRedis::new("pw-done");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Mailer>()))
        .await;
    let workers = app.start_workers().await.unwrap();
    let addr = serve(&app).await;

    let response = post_json(addr, "/users", &[("prefer", "wait=5")], &mail(20, false)).await;
    assert_eq!(response.status, 200, "{:?}", response.json());
    assert_eq!(response.header("preference-applied"), Some("wait=5"));
    let body = response.json();
    assert_eq!(body["state"], "completed");
    assert_eq!(body["returnValue"], "sent to ada@example.com");
    // What the handler gave its 202 stays: its fields (not over the status's), its headers.
    assert_eq!(body["accessToken"], "secret-once");
    assert_eq!(response.header("cache-control"), Some("no-store"));
    assert!(
        response.header("location").is_none(),
        "the status is the answer"
    );
    let id = body["id"].as_str().unwrap();
    assert_eq!(
        response.header("content-location"),
        Some(format!("/jobs/pw-mail/{id}").as_str())
    );

    // A status route that shows no return value: nor does its wait.
    let quiet = post_json(addr, "/quiet", &[("prefer", "wait=5")], &mail(0, false)).await;
    assert_eq!(quiet.status, 200);
    assert_eq!(quiet.json()["state"], "completed");
    assert!(quiet.json().get("returnValue").is_none());

    // Without the preference, the 202 of today.
    let plain = post_json(addr, "/users", &[], &mail(0, false)).await;
    assert_eq!(plain.status, 202);
    assert!(plain.header("preference-applied").is_none());
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn a_job_not_finished_in_time_is_answered_202_after_the_wait() {
    let redis = TestRedis::new("pw-slow");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Mailer>()))
        .await;
    // No workers: nothing finishes.
    let addr = serve(&app).await;
    let started = Instant::now();
    let response = post_json(addr, "/users", &[("prefer", "wait=1")], &mail(0, false)).await;
    let took = started.elapsed();
    assert_eq!(response.status, 202);
    assert!(response.header("preference-applied").is_none());
    assert!(response
        .header("location")
        .unwrap()
        .starts_with("/jobs/pw-mail/"));
    assert_eq!(
        response.json()["accessToken"],
        "secret-once",
        "the handler's 202"
    );
    assert!(took >= Duration::from_secs(1), "waited: {took:?}");
    assert!(
        took < Duration::from_secs(4),
        "no longer than asked: {took:?}"
    );

    // Past the app's maximum (5 s), the wait is cut to it.
    let started = Instant::now();
    let response = post_json(addr, "/users", &[("prefer", "wait=600")], &mail(0, false)).await;
    assert_eq!(response.status, 202);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(8),
        "cut to the maximum: {took:?}"
    );
    assert_eq!(app.watch_stats().watchers, 0);
}

#[tokio::test]
async fn a_failed_job_is_answered_with_its_failed_state_not_a_5xx() {
    let redis = TestRedis::new("pw-failed");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Mailer>()))
        .await;
    let workers = app.start_workers().await.unwrap();
    let addr = serve(&app).await;
    let response = post_json(addr, "/users", &[("prefer", "wait=5")], &mail(10, true)).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("preference-applied"), Some("wait=5"));
    assert_eq!(response.json()["state"], "failed");
    // The failure's text is internal: this status route does not show it.
    assert!(response.json().get("failedReason").is_none());
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn see_other_points_at_the_status_route() {
    let redis = TestRedis::new("pw-303");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Mailer>()))
        .await;
    let workers = app.start_workers().await.unwrap();
    let addr = serve(&app).await;
    let response = post_json(addr, "/see-other", &[("prefer", "wait=5")], &mail(0, false)).await;
    assert_eq!(response.status, 303);
    assert_eq!(response.header("preference-applied"), Some("wait=5"));
    assert_eq!(response.header("cache-control"), Some("no-store"));
    let location = response.header("location").unwrap();
    assert!(location.starts_with("/jobs/pw-mail/"), "{location}");
    let status = queue_tests::http::get(addr, location).await;
    assert_eq!(status.json()["state"], "completed");
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn a_client_that_leaves_ends_its_wait_at_once() {
    let redis = TestRedis::new("pw-gone");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Mailer>()))
        .await;
    let addr = serve(&app).await;
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = mail(0, false).to_string();
    let head = format!(
        "POST /users HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nPrefer: wait=5\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    client.write_all(head.as_bytes()).await.unwrap();
    wait_until(SOON, "the request to wait", || async {
        (app.watch_stats().watchers == 1).then_some(())
    })
    .await;
    drop(client);
    let left = Instant::now();
    wait_until(SOON, "the wait to end with its client", || async {
        (app.watch_stats().watchers == 0).then_some(())
    })
    .await;
    assert!(
        left.elapsed() < Duration::from_secs(2),
        "ended at once, not at the 5 s timeout: {:?}",
        left.elapsed()
    );
    // The server serves on.
    let response = request(addr, "GET", "/jobs/pw-mail/none-1", &[], b"")
        .await
        .unwrap();
    assert_eq!(response.status, 404);
}

#[tokio::test]
async fn a_wait_outside_the_idempotency_layer_still_waits() {
    let redis = TestRedis::new("pw-idem");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Mailer>()))
        .await;
    let workers = app.start_workers().await.unwrap();
    let addr = serve(&app).await;

    let response = post_json(
        addr,
        "/idempotent",
        &[("prefer", "wait=5"), ("idempotency-key", "pw-idem-1")],
        &mail(20, false),
    )
    .await;
    assert_eq!(response.status, 200, "{:?}", response.json());
    assert_eq!(response.json()["state"], "completed");
    workers.shutdown(SOON).await;
}
