//! An action on a job that does not exist did nothing, so it must not say it did: a
//! removal of a missing job answered 303 and audited a success. Each single-job action
//! (and a bulk one) on a missing job answers the dashboard's 404 page, and the audit
//! records it as failed, never as done.

use axum::http::request::Parts;
use axum::Router;
use queue_core::{Job, JobError, JobOptions, Processor};
use queue_dashboard::{Access, Dashboard};
use queue_tests::http::listener;
use queue_tests::TestRedis;

use crate::audit::audit_log;
use crate::support::{post_form, text};

const QUEUE: &str = "dash-ghosts";

fn operator(_: &Parts) -> Access {
    Access::operator("olga")
}

async fn ok(_: Job<serde_json::Value>) -> Result<(), JobError> {
    Ok(())
}

#[tokio::test]
async fn an_action_on_a_missing_job_is_a_404_and_is_never_audited_as_done() {
    let events = audit_log();
    let redis = TestRedis::new("dash-missing");
    let app = redis
        .app(|b| b.processor(Processor::new(QUEUE).any_job(ok)))
        .await;
    // The queue has a job, just not the ones asked for.
    app.queue::<serde_json::Value>(QUEUE)
        .unwrap()
        .add("x", serde_json::json!({}), JobOptions::new().job_id("real"))
        .await
        .unwrap();
    let (listener, addr) = listener().await;
    let router: Router = Router::new().merge(Dashboard::new(&app, operator).mount("/admin/queues"));
    tokio::spawn(async move { axum::serve(listener, router).await });

    let mut ghosts = Vec::new();
    for action in ["retry", "promote", "remove"] {
        let ghost = format!("ghost-{action}");
        let path = format!("/admin/queues/{QUEUE}/jobs/{ghost}/{action}");
        let answer = post_form(addr, &path, &[], "confirm=yes").await;
        assert_eq!(answer.status, 404, "{action}: {}", text(&answer));
        assert_eq!(answer.header("location"), None, "{action}");
        assert!(
            text(&answer).contains(&ghost) && text(&answer).contains("not found"),
            "{action}: {}",
            text(&answer)
        );
        ghosts.push(ghost);
    }
    // A selection whose first job is gone stops there, as a bulk action's refusal does.
    let bulk = post_form(
        addr,
        &format!("/admin/queues/{QUEUE}/bulk"),
        &[],
        "action=remove&state=waiting&confirm=yes&id=ghost-bulk&id=real",
    )
    .await;
    assert_eq!(bulk.status, 404, "{}", text(&bulk));
    assert!(text(&bulk).contains("ghost-bulk"), "{}", text(&bulk));
    ghosts.push("ghost-bulk".to_owned());
    assert!(app
        .queue::<serde_json::Value>(QUEUE)
        .unwrap()
        .get_job_state("real")
        .await
        .unwrap()
        .is_some());

    let logged = events.lock().unwrap().clone();
    for ghost in &ghosts {
        let lines: Vec<&String> = logged
            .iter()
            .filter(|l| l.contains(&format!("queue={QUEUE} job_id={ghost} ")))
            .collect();
        assert!(
            !lines.is_empty(),
            "the attempt on {ghost} is on record: {logged:#?}"
        );
        for line in lines {
            assert!(
                line.starts_with("message=dashboard action failed "),
                "{ghost} recorded as failed, not done: {line}"
            );
        }
    }
}
