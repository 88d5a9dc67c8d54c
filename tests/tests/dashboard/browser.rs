//! The dashboard in a real browser: Debian's chromium driven by playwright-core
//! (`tests/node/browser.mjs`; `scripts/test.sh` installs both). It finds a failed job,
//! retries it and sees it complete without reloading, and pauses the queue. Screenshots
//! of the overview, the job page and the queue page in the dark scheme are kept in
//! `target/dashboard-screenshots/`.

use std::path::PathBuf;
use std::time::Duration;

use axum::http::request::Parts;
use axum::Router;
use queue_core::{Job, JobError, JobOptions, JobState, OnChildFailure, Processor};
use queue_dashboard::{Access, Dashboard};
use queue_tests::http::listener;
use queue_tests::{node, wait_for_state, TestRedis, SOON};

fn policy(request: &Parts) -> Access {
    match request.headers.get("x-role") {
        Some(role) if role == "operator" => Access::operator("browser"),
        _ => Access::forbidden(),
    }
}

/// Fails the first run; the retry takes a moment, so the page sees it run. (A retry by
/// hand starts a new round of attempts, so the attempt number cannot tell the runs
/// apart.)
async fn flaky(_job: Job<serde_json::Value>) -> Result<(), JobError> {
    static FAILED_ONCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !FAILED_ONCE.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return Err(JobError::unrecoverable(std::io::Error::other(
            "mailbox full",
        )));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_retries_a_failed_job_pauses_drains_and_walks_a_flow_in_a_browser() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "no browser at {chromium}: run scripts/test.sh (it installs Debian's chromium), or set CHROMIUM"
    );
    let redis = TestRedis::new("dash-browser");
    let app = redis
        .app(|b| {
            b.processor(Processor::new("browser-mail").any_job(flaky))
                .processor(Processor::new("browser-drain").any_job(flaky))
                .processor(Processor::new("browser-steps").any_job(flaky))
        })
        .await;
    let q = app.queue::<serde_json::Value>("browser-mail").unwrap();
    // Only the mail queue runs: the others keep their jobs for the page to show.
    let workers = app.start_workers_for(&["browser-mail"]).await.unwrap();
    let drain = app.queue::<serde_json::Value>("browser-drain").unwrap();
    for i in 0..3 {
        drain
            .add(
                "x",
                serde_json::json!({}),
                JobOptions::new().job_id(format!("drain-{i}")),
            )
            .await
            .unwrap();
    }
    let steps = app.queue::<serde_json::Value>("browser-steps").unwrap();
    let step = |name: &str| {
        steps
            .flow_job(name, serde_json::json!({ "month": "2026-11" }))
            .options(JobOptions::new().job_id(format!("{name}-2026-11")))
    };
    app.add_flow(step("notify").child(
        OnChildFailure::FailParent,
        step("upload").child(
            OnChildFailure::FailParent,
            step("render").child(OnChildFailure::FailParent, step("aggregate")),
        ),
    ))
    .await
    .unwrap();
    q.add(
        "welcome",
        serde_json::json!({"to": "ada@example.com"}),
        JobOptions::new().job_id("mail-1"),
    )
    .await
    .unwrap();
    wait_for_state(&q, "mail-1", JobState::Failed, SOON).await;

    let (listener, addr) = listener().await;
    let router: Router = Router::new().merge(Dashboard::new(&app, policy).mount("/admin/queues"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/dashboard-screenshots");
    std::fs::create_dir_all(&shots).unwrap();

    let url = format!("http://{addr}/admin/queues");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("node/browser.mjs");
    let child = tokio::process::Command::new("node")
        .arg(script)
        .args([
            url.as_str(),
            "browser-mail",
            "mail-1",
            shots.to_str().unwrap(),
            "browser-drain",
            "browser-steps",
            "aggregate-2026-11",
        ])
        .env("CHROMIUM", &chromium)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let lines = node::output(child, Duration::from_secs(60)).await;
    let step = |name: &str| {
        lines
            .iter()
            .find(|l| l["step"] == name)
            .unwrap_or_else(|| panic!("no step `{name}` in {lines:?}"))
            .clone()
    };
    assert_eq!(step("job page")["state"], "failed");
    assert_eq!(step("attempts")["failures"], 1, "the attempt history");
    assert_ne!(
        step("after retry")["state"],
        "completed",
        "the page loaded before the job finished"
    );
    let retried = step("retried");
    assert_eq!(retried["state"], "completed");
    assert_eq!(
        retried["navigations"], 0,
        "the page updated itself: {retried}"
    );
    assert_eq!(step("paused")["resume"], true);
    let drained = step("drained");
    assert_eq!(drained["before"], "3");
    assert!(
        drained["question"]
            .as_str()
            .is_some_and(|q| q.contains("Remove the 3 waiting")),
        "{drained}"
    );
    assert_eq!(drained["after"], "0");
    let flow = step("flow");
    assert_eq!(
        flow["tree"],
        serde_json::json!([
            "notify-2026-11",
            "upload-2026-11",
            "render-2026-11",
            "aggregate-2026-11"
        ]),
        "root first: {flow}"
    );
    assert!(
        flow["root"]
            .as_str()
            .is_some_and(|h| h.starts_with("notify-2026-11")),
        "{flow}"
    );
    let errors = lines
        .iter()
        .find_map(|l| l.get("errors"))
        .expect("the error list");
    assert_eq!(
        errors,
        &serde_json::json!([]),
        "no script or console errors"
    );

    assert_eq!(
        q.get_job_state("mail-1").await.unwrap(),
        Some(JobState::Completed)
    );
    assert!(q.is_paused().await.unwrap());
    assert_eq!(drain.get_job_counts().await.unwrap().waiting, 0);
    for shot in [
        "overview.png",
        "failed-job.png",
        "job.png",
        "queue-dark.png",
        "confirm-drain.png",
        "flow.png",
    ] {
        let size = std::fs::metadata(shots.join(shot))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(size > 1000, "{shot}: {size} bytes");
    }
    workers.shutdown(SOON).await;
}
