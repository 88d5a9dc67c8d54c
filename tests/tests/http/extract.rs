//! An `#[inject_queue]` struct taken by an axum route as it is, without a flag: in a
//! crate that depends on `queue-axum` (as this one does), the attribute implements
//! axum's extractor for it.

use axum::routing::post;
use axum::{Json, Router};
use queue_axum::{Accepted, QueueError, QueueLayer};
use queue_core::app::Registrations;
use queue_core::prelude::*;
use queue_tests::http::{listener, post_json};
use queue_tests::{wait_for_state, TestRedis, SOON};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Signup {
    email: String,
}

#[processor("inject-route", job = "welcome")]
async fn welcome(job: Job<Signup>) -> Result<String, JobError> {
    Ok(format!("welcome {}", job.data.email))
}

/// No `(axum)`: the route below takes it all the same.
#[inject_queue]
struct Signups {
    #[queue("inject-route")]
    welcome: Queue<Signup>,
}

async fn sign_up(signups: Signups, Json(signup): Json<Signup>) -> Result<Accepted, QueueError> {
    let id = format!("welcome-{}", signup.email.replace('@', "-at-"));
    let job = signups
        .welcome
        .add("welcome", signup, JobOptions::new().job_id(id))
        .await?;
    Ok(job.into())
}

#[tokio::test]
async fn an_inject_queue_struct_without_a_flag_extracts_in_a_route() {
    let redis = TestRedis::new("inject-route");
    let app = redis
        .app(|b| b.registrations(Registrations::Queues(vec!["inject-route".into()])))
        .await;
    let workers = app.start_workers().await.unwrap();
    let (tcp, addr) = listener().await;
    let router = Router::new()
        .route("/signups", post(sign_up))
        .layer(QueueLayer::new(&app));
    tokio::spawn(async move { axum::serve(tcp, router).await });

    let answer = post_json(
        addr,
        "/signups",
        &[],
        &serde_json::json!({"email": "ada@example.com"}),
    )
    .await;
    assert_eq!(
        answer.status,
        202,
        "{:?}",
        String::from_utf8_lossy(&answer.body)
    );
    let q = app.queue::<Signup>("inject-route").unwrap();
    wait_for_state(&q, "welcome-ada-at-example.com", JobState::Completed, SOON).await;
    workers.shutdown(SOON).await;
}
