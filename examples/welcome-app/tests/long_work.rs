//! Long work in the welcome-app, over HTTP on real Redis and SQLite: the monthly report
//! (a flow of four idempotent steps) and the users export (batches, a timeout that is
//! retried, cancellation of a queued and of a running export).

mod support;

use queue_core::JobState;
use queue_tests::http::{get_with, post_json, request, HttpResponse};
use queue_tests::{wait_until, SOON};
use welcome_app::db::MonthTotals;
use welcome_app::jobs::exports::{export_job_id, rows_job_id, ExportRequest};
use welcome_app::jobs::reports::{report_id, REPORT_STAGES};
use welcome_app::mailer::FailurePolicy;

use support::{add_user, bearer, start, start_configured, Running, ScratchDir, ADMIN};

const MONTH: &str = "2025-11";

impl Running {
    async fn operator_get(&self, path: &str) -> HttpResponse {
        get_with(self.addr, path, &[("authorization", &bearer(ADMIN))]).await
    }

    async fn operator_post(&self, path: &str, body: &serde_json::Value) -> HttpResponse {
        post_json(self.addr, path, &[("authorization", &bearer(ADMIN))], body).await
    }

    async fn operator_delete(&self, path: &str) -> HttpResponse {
        request(
            self.addr,
            "DELETE",
            path,
            &[("authorization", &bearer(ADMIN))],
            b"",
        )
        .await
        .expect("the service answers")
    }

    /// Polls `path` until its JSON `state` is `state`.
    async fn wait_for(&self, path: &str, state: &str) -> serde_json::Value {
        wait_until(SOON, &format!("{path} to be {state}"), || async {
            let body = self.operator_get(path).await.json();
            (body["state"] == state).then_some(body)
        })
        .await
    }
}

/// Three users, two of them born in November.
async fn add_users(svc: &Running) {
    add_user(&svc.db, "u1", "a@example.com", "1990-11-03").await;
    add_user(&svc.db, "u2", "b@example.com", "1985-11-20").await;
    add_user(&svc.db, "u3", "c@example.com", "1991-05-01").await;
}

#[tokio::test]
async fn a_monthly_report_runs_its_four_steps_in_order_and_shows_them() {
    let svc = start("wa-report", FailurePolicy::Never).await;
    add_users(&svc).await;

    let started = svc
        .operator_post("/reports", &serde_json::json!({"month": MONTH}))
        .await;
    assert_eq!(started.status, 202);
    assert_eq!(started.header("location"), Some("/reports/2025-11"));
    let body = started.json();
    assert_eq!(body["jobId"], "report-2025-11");
    let jobs: Vec<&str> = body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["jobId"].as_str().unwrap())
        .collect();
    assert_eq!(
        jobs,
        [
            "report-2025-11",
            "report-2025-11-upload",
            "report-2025-11-render",
            "report-2025-11-aggregate"
        ]
    );

    let done = svc.wait_for("/reports/2025-11", "completed").await;
    let steps = done["steps"].as_array().unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(names, ["aggregate", "render", "upload", "notify"]);
    let mut last = 0;
    for step in steps {
        assert_eq!(step["state"], "completed", "{step}");
        let at = step["doneAt"].as_u64().unwrap_or_else(|| panic!("{step}"));
        assert!(at >= last, "stages recorded in order: {done}");
        last = at;
    }
    assert_eq!(done["file"], "reports/2025-11.txt");
    let files = svc.db.report_files(MONTH).await.unwrap();
    assert_eq!(files.len(), 1);
    assert!(files[0].contains("birthdays: 2"), "{}", files[0]);
    assert_eq!(svc.db.sent_count(&report_id(MONTH)).await.unwrap(), 1);

    // Asked again: the report exists; nothing is added or run again.
    let again = svc
        .operator_post("/reports", &serde_json::json!({"month": MONTH}))
        .await;
    assert_eq!(again.status, 202);
    assert_eq!(again.json()["duplicate"], true);
    assert_eq!(svc.db.sent_count(&report_id(MONTH)).await.unwrap(), 1);

    // The client's mistakes, and a stranger.
    for month in ["2025-13", "2025-1", "november", "2999-01"] {
        let bad = svc
            .operator_post("/reports", &serde_json::json!({"month": month}))
            .await;
        assert_eq!(bad.status, 422, "{month}: {}", bad.json());
        assert_eq!(bad.json()["field"], "month");
    }
    let stranger = post_json(
        svc.addr,
        "/reports",
        &[],
        &serde_json::json!({"month": MONTH}),
    )
    .await;
    assert_eq!(stranger.status, 401);
    // Every route of the long work is the operator's.
    let export = "/exports/0123456789abcdef0123456789abcdef";
    for (method, path) in [
        ("GET", "/reports/2025-11"),
        ("POST", "/exports"),
        ("GET", export),
        ("DELETE", export),
    ] {
        let answer = request(svc.addr, method, path, &[], b"").await.unwrap();
        assert_eq!(answer.status, 401, "{method} {path}");
    }
    assert_eq!(svc.operator_get("/reports/2025-10").await.status, 404);
    svc.stop().await;
}

#[tokio::test]
async fn report_steps_run_again_after_a_kill_do_not_repeat_their_effects() {
    let svc = start("wa-report-kill", FailurePolicy::Never).await;
    add_users(&svc).await;
    let key = report_id(MONTH);
    // What workers killed halfway leave behind, each at a different point:
    // - `aggregate` recorded its stage, and died before its job completed;
    svc.db
        .step(REPORT_STAGES, &key, "aggregated", || async {
            Ok::<_, std::io::Error>(MonthTotals {
                birthdays: 7,
                coupons: 1,
            })
        })
        .await
        .unwrap();
    // - `upload` stored the file, and died before recording its stage;
    svc.db
        .store_report_file(MONTH, "stored by the killed run")
        .await
        .unwrap();
    // - `notify` sent the mail, and died before recording its stage.
    svc.db
        .insert_sent(
            &key,
            "reports@localhost",
            "Monthly report",
            "sent by the killed run",
        )
        .await
        .unwrap();

    svc.operator_post("/reports", &serde_json::json!({"month": MONTH}))
        .await;
    let done = svc.wait_for("/reports/2025-11", "completed").await;
    assert!(done["steps"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["state"] == "completed"));

    // `aggregate` ran again and kept the figures on record (the users say 2).
    let reports = svc.app.queue::<serde_json::Value>("report").unwrap();
    let render = reports
        .get_job("report-2025-11-render")
        .await
        .unwrap()
        .unwrap();
    let document = render.return_value.unwrap()["document"].clone();
    assert!(
        document.as_str().unwrap().contains("birthdays: 7"),
        "{document}"
    );
    // `upload` ran again and stored nothing: one file, the first.
    assert_eq!(
        svc.db.report_files(MONTH).await.unwrap(),
        ["stored by the killed run"]
    );
    let upload = reports
        .get_job("report-2025-11-upload")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(upload.return_value.unwrap()["stored_now"], false);
    // `notify` ran again and sent nothing.
    assert_eq!(svc.db.sent_count(&key).await.unwrap(), 1);
    let notify = reports.get_job("report-2025-11").await.unwrap().unwrap();
    assert_eq!(notify.return_value, Some(serde_json::json!("already-sent")));
    svc.stop().await;
}

/// A service whose exports write one user per batch and pause `pause_ms` between
/// batches, with `timeout_ms` per attempt.
async fn start_exports(label: &str, pause_ms: u64, timeout_ms: u64) -> Running {
    let redis = queue_tests::TestRedis::new(label);
    let dir = ScratchDir::new(label);
    start_configured(
        redis,
        dir,
        FailurePolicy::Never,
        &[
            ("EXPORT_BATCH_SIZE", "1".to_owned()),
            ("EXPORT_BATCH_PAUSE_MS", pause_ms.to_string()),
            ("EXPORT_TIMEOUT_MS", timeout_ms.to_string()),
        ],
    )
    .await
}

async fn add_many_users(svc: &Running, n: usize) {
    for i in 0..n {
        add_user(
            &svc.db,
            &format!("u{i}"),
            &format!("u{i}@example.com"),
            "1990-01-01",
        )
        .await;
    }
}

async fn start_export(svc: &Running) -> String {
    let started = svc.operator_post("/exports", &serde_json::json!({})).await;
    assert_eq!(started.status, 202, "{}", started.json());
    let id = started.json()["exportId"].as_str().unwrap().to_owned();
    assert_eq!(
        started.header("location"),
        Some(format!("/exports/{id}").as_str())
    );
    id
}

#[tokio::test]
async fn an_export_writes_its_batches_and_delivers_one_file() {
    let svc = start_exports("wa-export", 0, 60_000).await;
    add_many_users(&svc, 5).await;
    let id = start_export(&svc).await;
    let done = svc.wait_for(&format!("/exports/{id}"), "completed").await;
    assert_eq!(done["rowsDelivered"], 5);
    assert_eq!(done["rows"]["progress"]["batches"], 5);
    assert_eq!(svc.db.export_batches(&id).await.unwrap().len(), 5);
    svc.stop().await;
}

#[tokio::test]
async fn a_running_export_stops_at_its_next_batch_and_fails_as_cancelled_without_retries() {
    let svc = start_exports("wa-export-cancel", 150, 60_000).await;
    add_many_users(&svc, 20).await;
    let id = start_export(&svc).await;
    let path = format!("/exports/{id}");
    wait_until(SOON, "the export to write a batch", || async {
        let body = svc.operator_get(&path).await.json();
        (body["rows"]["progress"]["batches"].as_u64() >= Some(1)).then_some(())
    })
    .await;

    let cancelled = svc.operator_delete(&path).await;
    assert_eq!(cancelled.status, 202);
    assert_eq!(cancelled.json()["outcome"], "cancelling");
    let failed = svc.wait_for(&path, "failed").await;
    assert_eq!(failed["rows"]["state"], "failed");
    assert_eq!(failed["rows"]["attemptsMade"], 1, "no retries: {failed}");
    let reason = failed["rows"]["failedReason"].as_str().unwrap();
    assert!(reason.contains("cancelled"), "{reason}");
    let root_reason = failed["failedReason"].as_str().unwrap();
    assert!(
        root_reason.contains(&format!(":export:{}", rows_job_id(&id))),
        "the parent names the child: {root_reason}"
    );
    let written = svc.db.export_batches(&id).await.unwrap().len();
    assert!(
        (1..20).contains(&written),
        "stopped early: {written} batches"
    );
    assert_eq!(svc.db.export_file_rows(&id).await.unwrap(), None);

    let again = svc.operator_delete(&path).await;
    assert_eq!(again.status, 409);
    assert_eq!(again.json()["outcome"], "finished");
    svc.stop().await;
}

#[tokio::test]
async fn a_queued_export_is_removed_with_its_children() {
    let svc = start_exports("wa-export-queued", 0, 60_000).await;
    let exports = svc.app.queue::<ExportRequest>("export").unwrap();
    exports.pause().await.unwrap();
    let id = start_export(&svc).await;
    assert_eq!(
        exports.get_job_state(&export_job_id(&id)).await.unwrap(),
        Some(JobState::WaitingChildren)
    );

    let removed = svc.operator_delete(&format!("/exports/{id}")).await;
    assert_eq!(removed.status, 200);
    assert_eq!(removed.json()["outcome"], "removed");
    for job in [export_job_id(&id), rows_job_id(&id)] {
        assert_eq!(exports.get_job(&job).await.unwrap(), None, "{job}");
    }
    assert_eq!(
        svc.operator_get(&format!("/exports/{id}")).await.status,
        404
    );
    assert_eq!(
        svc.operator_delete(&format!("/exports/{id}")).await.status,
        404
    );
    assert_eq!(svc.operator_delete("/exports/not-an-id").await.status, 404);
    exports.resume().await.unwrap();
    svc.stop().await;
}

#[tokio::test]
async fn an_export_attempt_that_times_out_is_retried_and_resumes_then_fails() {
    // 10 batches, 200 ms apart, against 300 ms per attempt: each of the three attempts
    // times out after at most two batches.
    let svc = start_exports("wa-export-timeout", 200, 300).await;
    add_many_users(&svc, 10).await;
    let id = start_export(&svc).await;
    let failed = svc.wait_for(&format!("/exports/{id}"), "failed").await;
    assert_eq!(failed["rows"]["attemptsMade"], 3, "{failed}");
    let reason = failed["rows"]["failedReason"].as_str().unwrap();
    assert!(reason.contains("timed out after 300ms"), "{reason}");
    // Each attempt went on from the batches stored before it: more than one attempt's
    // worth is stored, and nothing twice.
    let written = svc.db.export_batches(&id).await.unwrap().len();
    assert!((3..10).contains(&written), "{written} batches");
    svc.stop().await;
}

/// The server-sent events of `path` until the stream ends: `(event, data)` pairs.
async fn stream_to_end(svc: &Running, path: &str) -> Vec<(String, serde_json::Value)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(svc.addr).await.unwrap();
    // HTTP/1.0: the body is the stream itself, until the server closes it.
    let head = format!(
        "GET {path} HTTP/1.0\r\nHost: {}\r\nAuthorization: {}\r\n\r\n",
        svc.addr,
        bearer(ADMIN)
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(SOON, stream.read_to_end(&mut raw))
        .await
        .expect("the stream ends with the report")
        .unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    body.split("\n\n")
        .filter_map(|block| {
            let event = block.lines().find_map(|l| l.strip_prefix("event:"))?;
            let data = block.lines().find_map(|l| l.strip_prefix("data:"))?;
            Some((
                event.trim().to_owned(),
                serde_json::from_str(data.trim()).unwrap(),
            ))
        })
        .collect()
}

#[tokio::test]
async fn the_report_streams_its_steps_live() {
    let svc = start("wa-report-live", FailurePolicy::Never).await;
    add_users(&svc).await;
    // Held until the stream is open, so that it sees every step move.
    let report = svc.app.queue::<serde_json::Value>("report").unwrap();
    report.pause().await.unwrap();
    let started = svc
        .operator_post("/reports", &serde_json::json!({"month": MONTH}))
        .await;
    assert_eq!(started.status, 202);
    let path = format!("/reports/{MONTH}/events");
    let reading = async { stream_to_end(&svc, &path).await };
    let resuming = async {
        // The stream's first event is sent at once; resume a moment after it opened.
        wait_until(SOON, "the stream to watch the steps", || async {
            (svc.app.watch_stats().watchers >= 4).then_some(())
        })
        .await;
        report.resume().await.unwrap();
    };
    let (events, ()) = tokio::join!(reading, resuming);
    let states: Vec<Vec<String>> = events
        .iter()
        .map(|(_, status)| {
            status["steps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["state"].as_str().unwrap_or("none").to_owned())
                .collect()
        })
        .collect();
    assert!(events.iter().all(|(event, _)| event == "report"));
    assert_eq!(
        states[0],
        [
            "waiting",
            "waiting-children",
            "waiting-children",
            "waiting-children"
        ]
    );
    assert_eq!(states.last().unwrap(), &["completed"; 4]);
    assert!(
        events.len() >= 4,
        "one event per move, not only the first and the last: {states:?}"
    );
    assert_eq!(events.last().unwrap().1["file"], "reports/2025-11.txt");
    // Every stream and its watchers are gone with the report.
    wait_until(SOON, "the stream's watchers to leave", || async {
        (svc.app.watch_stats().watchers == 0).then_some(())
    })
    .await;
}
