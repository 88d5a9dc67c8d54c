//! A sealed queue behind HTTP: the 202 that waits (`Prefer: wait`) and the status
//! route answer the result (and a sealed failure reason) opened when the application's
//! routes show them, and nothing of the payload when they do not; Redis keeps none of
//! them in clear.

use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::post;
use axum::{Json, Router};
use queue_axum::{Accepted, JobRoutes, PreferWaitLayer, QueueError, QueueLayer};
use queue_core::encryption::Keyring;
use queue_core::prelude::*;
use queue_core::QueueApp;
use queue_tests::http::{get, post_json};
use queue_tests::{TestRedis, SOON};

const QUEUE: &str = "http-sealed";

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Mail {
    to: String,
}

async fn send(job: Job<Mail>) -> Result<String, JobError> {
    if job.data.to.starts_with("refused") {
        return Err(JobError::unrecoverable(std::io::Error::other(format!(
            "the mail server refused {}",
            job.data.to
        ))));
    }
    Ok(format!("sent to {}", job.data.to))
}

/// `/mail` adds a job and waits for it; `/jobs/..` shows a job without its payload or
/// result (the default), `/admin/jobs/..` with both (in an application, behind its own
/// access check).
async fn serve(app: &QueueApp) -> SocketAddr {
    let mail = app.queue::<Mail>(QUEUE).unwrap();
    let add = move |Json(body): Json<Mail>| {
        let mail = mail.clone();
        async move {
            let job = mail.add("welcome", body, JobOptions::new()).await?;
            Ok::<_, QueueError>(Accepted::from(job))
        }
    };
    let shows_everything = || {
        JobRoutes::new()
            .include_data(true)
            .include_return_value(true)
            .include_failed_reason(true)
    };
    let router = Router::new()
        .route("/mail", post(add))
        .layer(PreferWaitLayer::new(Duration::from_secs(5)).status(shows_everything()))
        .merge(JobRoutes::new().router())
        .nest("/admin", shows_everything().router())
        .layer(QueueLayer::new(app));
    let addr = queue_tests::http::serve(router).await;
    addr
}

#[tokio::test]
async fn the_waiting_202_and_the_status_route_show_a_sealed_result_opened_where_results_are_shown()
{
    let redis = TestRedis::new("http-sealed");
    let app = redis
        .app(|b| {
            b.keyring(Keyring::new("k1", [1; 32]).unwrap())
                .encrypt_queue(QUEUE)
                .encrypt_failures_and_logs(true)
                .processor(Processor::new(QUEUE).job("welcome", send))
        })
        .await;
    let workers = app.start_workers().await.unwrap();
    let addr = serve(&app).await;
    let address = format!("ada-{}@example.com", uuid::Uuid::new_v4().simple());

    let response = post_json(
        addr,
        "/mail",
        &[("prefer", "wait=5")],
        &serde_json::json!({ "to": address }),
    )
    .await;
    assert_eq!(response.status, 200, "{:?}", response.json());
    let body = response.json();
    assert_eq!(body["returnValue"], format!("sent to {address}"));
    let id = body["id"].as_str().unwrap().to_owned();

    let admin = get(addr, &format!("/admin/jobs/{QUEUE}/{id}")).await.json();
    assert_eq!(admin["data"]["to"], address.as_str());
    assert_eq!(admin["returnValue"], format!("sent to {address}"));
    let public = get(addr, &format!("/jobs/{QUEUE}/{id}")).await;
    assert_eq!(public.status, 200);
    let public = String::from_utf8_lossy(&public.body).into_owned();
    assert!(
        !public.contains(&address) && !public.contains("aes-256-gcm"),
        "{public}"
    );

    // A failure that quotes the address: sealed in Redis, opened where reasons show.
    let refused = format!("refused-{}@example.com", uuid::Uuid::new_v4().simple());
    let response = post_json(
        addr,
        "/mail",
        &[("prefer", "wait=5")],
        &serde_json::json!({ "to": refused }),
    )
    .await;
    let id = response.json()["id"].as_str().unwrap().to_owned();
    let admin = get(addr, &format!("/admin/jobs/{QUEUE}/{id}")).await.json();
    assert_eq!(admin["state"], "failed", "{admin}");
    assert_eq!(
        admin["failedReason"],
        format!("the mail server refused {refused}")
    );

    for secret in [&address, &refused] {
        assert_eq!(redis.keys_holding(secret), Vec::<String>::new());
    }
    workers.shutdown(SOON).await;
}
