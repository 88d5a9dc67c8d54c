//! The dashboard over real HTTP and a real Redis: access levels, the cross-site check,
//! every page, the actions, the audit log, bad input and Redis down.

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::request::Parts;
use axum::Router;
use queue_core::{Job, JobError, JobOptions, JobState, Processor, QueueApp};
use queue_dashboard::{Access, Dashboard};

use crate::audit::audit_log;
use crate::support::text;
use queue_tests::http::{listener, request, HttpResponse};
use queue_tests::{wait_for_state, PrivateRedis, TestRedis, SOON};

/// The test's policy: the `x-role` header says who this is.
fn policy(request: &Parts) -> Access {
    match request.headers.get("x-role").and_then(|v| v.to_str().ok()) {
        Some("operator") => Access::operator("olga").with_payloads(),
        Some("viewer") => Access::read_only("victor"),
        _ => Access::forbidden(),
    }
}

async fn serve(app: &QueueApp) -> SocketAddr {
    let (listener, addr) = listener().await;
    let router = Router::new().nest("/admin/queues", Dashboard::new(app, policy).router());
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

async fn get(addr: SocketAddr, path: &str, role: &str) -> HttpResponse {
    request(addr, "GET", path, &[("x-role", role)], b"")
        .await
        .expect("request")
}

/// A POST as the dashboard's own page sends it.
async fn post(addr: SocketAddr, path: &str, role: &str) -> HttpResponse {
    post_with(
        addr,
        path,
        &[("x-role", role), ("sec-fetch-site", "same-origin")],
    )
    .await
}

async fn post_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> HttpResponse {
    request(addr, "POST", path, headers, b"")
        .await
        .expect("request")
}

async fn fails(job: Job<serde_json::Value>) -> Result<(), JobError> {
    if job.data["fail"] == true && job.attempt() == 1 {
        return Err(JobError::unrecoverable(std::io::Error::other(
            "smtp said <no>",
        )));
    }
    Ok(())
}

/// An app with queue `dash-mail`, a failed job `mail-1` and a waiting `mail-2` (the
/// worker is stopped once `mail-1` has failed).
async fn with_a_failed_job(redis: &TestRedis) -> QueueApp {
    let app = redis
        .app(|b| b.processor(Processor::new("dash-mail").any_job(fails)))
        .await;
    let q = app.queue::<serde_json::Value>("dash-mail").unwrap();
    let workers = app.start_workers().await.unwrap();
    q.add(
        "welcome",
        serde_json::json!({"fail": true, "to": "<script>alert(1)</script>"}),
        JobOptions::new().job_id("mail-1"),
    )
    .await
    .unwrap();
    wait_for_state(&q, "mail-1", JobState::Failed, SOON).await;
    workers.shutdown(SOON).await;
    q.add(
        "welcome",
        serde_json::json!({}),
        JobOptions::new().job_id("mail-2"),
    )
    .await
    .unwrap();
    app
}

#[tokio::test]
async fn nobody_sees_anything_without_the_policys_yes() {
    let redis = TestRedis::new("dash-access");
    let app = with_a_failed_job(&redis).await;
    let addr = serve(&app).await;
    for path in [
        "/admin/queues",
        "/admin/queues/dash-mail",
        "/admin/queues/dash-mail/jobs/mail-1",
        "/admin/queues/-/assets/dashboard.css",
    ] {
        assert_eq!(get(addr, path, "stranger").await.status, 403, "{path}");
        assert_eq!(get(addr, path, "viewer").await.status, 200, "{path}");
    }
    // A viewer may look, not act; nothing changes.
    let refused = post(addr, "/admin/queues/dash-mail/jobs/mail-1/retry", "viewer").await;
    assert_eq!(refused.status, 403);
    let q = app.queue::<serde_json::Value>("dash-mail").unwrap();
    assert_eq!(
        q.get_job_state("mail-1").await.unwrap(),
        Some(JobState::Failed)
    );
    // Every answer carries the headers that keep job data out of caches and frames.
    let page = get(addr, "/admin/queues", "viewer").await;
    assert_eq!(page.header("cache-control"), Some("no-store"));
    // The way home is the mount point, which axum routes (it does not route it with a
    // trailing slash).
    assert!(text(&page).contains(r#"<a class="home" href="/admin/queues">"#));
    assert!(page
        .header("content-security-policy")
        .is_some_and(|csp| csp.contains("frame-ancestors 'none'")));
}

#[tokio::test]
async fn actions_from_another_site_are_refused() {
    let redis = TestRedis::new("dash-csrf");
    let app = with_a_failed_job(&redis).await;
    let addr = serve(&app).await;
    let q = app.queue::<serde_json::Value>("dash-mail").unwrap();
    let path = "/admin/queues/dash-mail/actions/pause";
    let host = addr.to_string();
    let evil_origin = "https://evil.example".to_owned();
    let own_origin = format!("http://{host}");
    // Our host under another scheme is another origin; so is plain HTTP where the
    // proxy in front says it served HTTPS.
    let odd_scheme = format!("foo://{host}");
    let downgraded = format!("http://{host}");
    for headers in [
        vec![("x-role", "operator"), ("sec-fetch-site", "cross-site")],
        vec![("x-role", "operator"), ("origin", evil_origin.as_str())],
        vec![("x-role", "operator"), ("origin", odd_scheme.as_str())],
        vec![
            ("x-role", "operator"),
            ("origin", downgraded.as_str()),
            ("x-forwarded-proto", "https"),
        ],
        // No Origin and no Sec-Fetch-Site: not from a browser page of ours.
        vec![("x-role", "operator")],
    ] {
        assert_eq!(
            post_with(addr, path, &headers).await.status,
            403,
            "{headers:?}"
        );
        assert!(!q.is_paused().await.unwrap(), "{headers:?}");
    }
    // The same action from the dashboard's own origin goes through.
    let done = post_with(
        addr,
        path,
        &[("x-role", "operator"), ("origin", own_origin.as_str())],
    )
    .await;
    assert_eq!(done.status, 303);
    assert!(q.is_paused().await.unwrap());
}

#[tokio::test]
async fn the_pages_show_counts_jobs_and_a_job_escaped_and_payloads_only_when_allowed() {
    let redis = TestRedis::new("dash-pages");
    let app = with_a_failed_job(&redis).await;
    let addr = serve(&app).await;

    let overview = text(&get(addr, "/admin/queues", "viewer").await);
    assert!(
        overview.contains(r#"href="/admin/queues/dash-mail""#),
        "{overview}"
    );
    assert!(
        overview.contains(r#"<span class="bad">1</span>"#),
        "one failed: {overview}"
    );

    let failed = text(&get(addr, "/admin/queues/dash-mail?state=failed", "viewer").await);
    assert!(
        failed.contains(r#"href="/admin/queues/dash-mail/jobs/mail-1""#),
        "{failed}"
    );
    assert!(
        !failed.contains("mail-2"),
        "only the failed state: {failed}"
    );
    assert!(failed.contains("smtp said &lt;no&gt;"), "{failed}");
    assert!(!failed.contains("<no>"), "job text is escaped: {failed}");
    // A viewer gets no action buttons.
    assert!(
        !failed.contains("<form class=\"inline\" method=\"post\""),
        "{failed}"
    );

    let as_viewer = text(&get(addr, "/admin/queues/dash-mail/jobs/mail-1", "viewer").await);
    assert!(as_viewer.contains("failed"), "{as_viewer}");
    assert!(
        !as_viewer.contains("alert(1)"),
        "the payload is hidden: {as_viewer}"
    );
    let as_operator = text(&get(addr, "/admin/queues/dash-mail/jobs/mail-1", "operator").await);
    assert!(
        as_operator.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{as_operator}"
    );
    assert!(!as_operator.contains("<script>"), "escaped: {as_operator}");
    assert!(as_operator.contains("/admin/queues/dash-mail/jobs/mail-1/retry"));

    // Cleaning finished jobs: the confirmation counts exactly those that go.
    let clean = text(
        &get(
            addr,
            "/admin/queues/dash-mail/actions/clean?state=failed&older_than_s=0",
            "operator",
        )
        .await,
    );
    assert!(
        clean.contains("Remove the <strong>1</strong> failed jobs"),
        "{clean}"
    );
    let none = text(
        &get(
            addr,
            "/admin/queues/dash-mail/actions/clean?state=failed&older_than_s=3600",
            "operator",
        )
        .await,
    );
    assert!(
        none.contains("Remove the <strong>0</strong> failed jobs"),
        "{none}"
    );

    // A lookup by id goes to the job's page.
    let lookup = get(addr, "/admin/queues/dash-mail?id=mail-2", "viewer").await;
    assert_eq!(lookup.status, 303);
    assert_eq!(
        lookup.header("location"),
        Some("/admin/queues/dash-mail/jobs/mail-2")
    );
}

#[tokio::test]
async fn a_queue_is_paged_fifty_at_a_time() {
    let redis = TestRedis::new("dash-paging");
    let app = redis.app(|b| b).await;
    let q = app.queue::<serde_json::Value>("dash-many").unwrap();
    for i in 0..60 {
        q.add(
            "n",
            serde_json::json!(i),
            JobOptions::new().job_id(format!("n-{i}")),
        )
        .await
        .unwrap();
    }
    let addr = serve(&app).await;
    let rows = |page: &str| page.matches("<tr data-job=").count();
    let first = text(&get(addr, "/admin/queues/dash-many?state=waiting", "viewer").await);
    assert_eq!(rows(&first), 50);
    assert!(first.contains("page 1 of 2"), "{first}");
    assert!(first.contains("n-59"), "newest first");
    let second = text(
        &get(
            addr,
            "/admin/queues/dash-many?state=waiting&page=2",
            "viewer",
        )
        .await,
    );
    assert_eq!(rows(&second), 10);
    assert!(second.contains("n-0\""), "{second}");
}

#[tokio::test]
async fn operators_retry_remove_and_pause_and_each_action_is_audited() {
    let events = audit_log();
    let redis = TestRedis::new("dash-actions");
    let app = with_a_failed_job(&redis).await;
    let addr = serve(&app).await;
    let q = app.queue::<serde_json::Value>("dash-mail").unwrap();
    let job = "/admin/queues/dash-mail/jobs/mail-1";

    let retried = post(addr, &format!("{job}/retry"), "operator").await;
    assert_eq!(retried.status, 303);
    assert_eq!(retried.header("location"), Some(job));
    assert_eq!(
        q.get_job_state("mail-1").await.unwrap(),
        Some(JobState::Waiting)
    );
    // The job has moved on: retrying it again is refused with a reason, not a 500.
    let again = post(addr, &format!("{job}/retry"), "operator").await;
    assert_eq!(again.status, 409, "{}", text(&again));
    assert!(text(&again).contains("mail-1"), "{}", text(&again));

    // Removing is confirmed first, on a page that says what goes.
    let asked = post(
        addr,
        "/admin/queues/dash-mail/jobs/mail-2/remove",
        "operator",
    )
    .await;
    assert_eq!(asked.status, 200);
    assert!(
        text(&asked).contains("This touches 1 job"),
        "{}",
        text(&asked)
    );
    assert!(q.get_job_state("mail-2").await.unwrap().is_some());
    let removed = post_form(
        addr,
        "/admin/queues/dash-mail/jobs/mail-2/remove",
        "confirm=yes",
    )
    .await;
    assert_eq!(removed.status, 303);
    assert_eq!(q.get_job_state("mail-2").await.unwrap(), None);
    assert_eq!(
        get(addr, "/admin/queues/dash-mail/jobs/mail-2", "operator")
            .await
            .status,
        404
    );

    assert_eq!(
        post(addr, "/admin/queues/dash-mail/actions/pause", "operator")
            .await
            .status,
        303
    );
    assert!(q.is_paused().await.unwrap());
    let page = text(&get(addr, "/admin/queues/dash-mail", "operator").await);
    assert!(
        page.contains("paused") && page.contains("actions/resume"),
        "{page}"
    );
    assert_eq!(
        post(addr, "/admin/queues/dash-mail/actions/resume", "operator")
            .await
            .status,
        303
    );
    assert!(!q.is_paused().await.unwrap());

    let logged = events.lock().unwrap().clone();
    for needle in [
        "who=olga action=retry queue=dash-mail job_id=mail-1",
        "who=olga action=remove queue=dash-mail job_id=mail-2",
        "who=olga action=pause queue=dash-mail",
        "who=olga action=resume queue=dash-mail",
    ] {
        assert!(
            logged.iter().any(|l| l.contains(needle)),
            "{needle} in {logged:#?}"
        );
    }
    assert!(
        logged
            .iter()
            .any(|l| l.contains("action=retry") && l.contains("failed")),
        "the refused retry is audited too: {logged:#?}"
    );
}

#[tokio::test]
async fn bad_input_gets_4xx_pages_and_redis_down_a_503() {
    let redis = TestRedis::new("dash-bad");
    let app = with_a_failed_job(&redis).await;
    let addr = serve(&app).await;
    for (path, status) in [
        ("/admin/queues/no-such-queue", 404),
        ("/admin/queues/dash-mail/jobs/no-such-job", 404),
        ("/admin/queues/dash-mail?state=sleeping", 400),
        ("/admin/queues/dash-mail?page=0", 400),
        ("/admin/queues/dash-mail?page=x", 400),
        ("/admin/queues/no/such/page", 404),
    ] {
        assert_eq!(get(addr, path, "viewer").await.status, status, "{path}");
    }
    let unknown = post(addr, "/admin/queues/dash-mail/actions/explode", "operator").await;
    assert_eq!(unknown.status, 400);
    assert!(
        text(&unknown).contains("pause, resume"),
        "{}",
        text(&unknown)
    );

    let mut down = PrivateRedis::start();
    let app = QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", down.port()))
        .command_timeout(Duration::from_secs(1))
        .processor(Processor::new("dash-down").any_job(fails))
        .build()
        .await
        .unwrap();
    let addr = serve(&app).await;
    assert_eq!(get(addr, "/admin/queues", "viewer").await.status, 200);
    down.kill();
    for path in ["/admin/queues", "/admin/queues/dash-down"] {
        let page = get(addr, path, "viewer").await;
        assert_eq!(page.status, 503, "{path}");
        assert!(text(&page).contains("unavailable"), "{}", text(&page));
        assert!(page.header("retry-after").is_some());
    }
}

/// A POST with a form body, as the dashboard's own forms send it.
async fn post_form(addr: SocketAddr, path: &str, form: &str) -> HttpResponse {
    request(
        addr,
        "POST",
        path,
        &[
            ("x-role", "operator"),
            ("sec-fetch-site", "same-origin"),
            ("content-type", "application/x-www-form-urlencoded"),
        ],
        form.as_bytes(),
    )
    .await
    .expect("request")
}

async fn redis_conn() -> queue_tests::AnyConnection {
    queue_tests::async_connection().await
}

#[tokio::test]
async fn the_overview_shows_workers_limits_schedulers_and_the_last_hour() {
    let redis = TestRedis::new("dash-overview");
    let app = redis
        .app(|b| {
            b.processor(
                Processor::new("dash-busy")
                    .per_minute_metrics(60)
                    .any_job(fails),
            )
        })
        .await;
    let q = app.queue::<serde_json::Value>("dash-busy").unwrap();
    let workers = app.start_workers().await.unwrap();
    q.add(
        "ok",
        serde_json::json!({}),
        JobOptions::new().job_id("busy-1"),
    )
    .await
    .unwrap();
    wait_for_state(&q, "busy-1", JobState::Completed, SOON).await;
    // A per-minute point is pushed when a minute boundary has passed: move the last
    // reading back five minutes, then finish one more job.
    let mut conn = redis_conn().await;
    let five_minutes_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        - 5 * 60_000;
    let _: () = redis::cmd("HSET")
        .arg(format!("{}:dash-busy:metrics:completed", redis.prefix()))
        .arg("prevTS")
        .arg(five_minutes_ago)
        .query_async(&mut conn)
        .await
        .unwrap();
    q.add(
        "ok",
        serde_json::json!({}),
        JobOptions::new().job_id("busy-2"),
    )
    .await
    .unwrap();
    wait_for_state(&q, "busy-2", JobState::Completed, SOON).await;
    q.upsert_scheduler(
        "hourly",
        queue_core::options::Schedule::every(Duration::from_secs(3600)),
        "tick",
        serde_json::json!({}),
        JobOptions::new(),
    )
    .await
    .unwrap();
    // Global limits as Node's `setGlobalConcurrency` / `setGlobalRateLimit` store them.
    let _: () = redis::cmd("HSET")
        .arg(format!("{}:dash-busy:meta", redis.prefix()))
        .arg("concurrency")
        .arg(3)
        .arg("max")
        .arg(10)
        .arg("duration")
        .arg(1000)
        .query_async(&mut conn)
        .await
        .unwrap();
    let addr = serve(&app).await;

    let page = text(&get(addr, "/admin/queues", "viewer").await);
    let row = page
        .split("<tr>")
        .find(|r| r.contains("dash-busy"))
        .unwrap_or_else(|| panic!("{page}"));
    assert!(
        row.contains(r#"/-/workers?queue=dash-busy">1</a>"#),
        "one worker connected: {row}"
    );
    assert!(row.contains("3 at once, 10 per 1000 ms"), "{row}");
    assert!(row.contains(r#"/schedulers">1</a>"#), "{row}");
    assert!(
        row.contains(r#"<svg class="spark good""#),
        "completed this hour: {row}"
    );

    let moved = get(addr, "/admin/queues/dash-busy/workers", "viewer").await;
    assert_eq!(
        moved.header("location"),
        Some("/admin/queues/-/workers?queue=dash-busy")
    );
    let listed = text(&get(addr, "/admin/queues/-/workers?queue=dash-busy", "viewer").await);
    // The queue by its name, not BullMQ's connection name (`<prefix>:<base64>`).
    assert!(
        listed.contains(r#"href="/admin/queues/dash-busy""#)
            && !listed.contains("ZGFzaC1idXN5")
            && listed.contains("127.0.0.1:"),
        "{listed}"
    );

    let schedulers = text(&get(addr, "/admin/queues/dash-busy/schedulers", "operator").await);
    assert!(
        schedulers.contains("hourly") && schedulers.contains("every 1 h"),
        "{schedulers}"
    );
    // Run now: the scheduler's waiting run starts at once, and the worker completes it.
    let run = post(
        addr,
        "/admin/queues/dash-busy/schedulers/hourly/run",
        "operator",
    )
    .await;
    assert_eq!(run.status, 303, "{}", text(&run));
    queue_tests::wait_until(SOON, "the scheduled run completes", || async {
        let counts = q.get_job_counts().await.ok()?;
        (counts.completed >= 3).then_some(())
    })
    .await;
    let removed = post(
        addr,
        "/admin/queues/dash-busy/schedulers/hourly/remove",
        "operator",
    )
    .await;
    assert_eq!(removed.status, 303);
    assert_eq!(q.scheduler_count().await.unwrap(), 0);
    assert_eq!(
        post(
            addr,
            "/admin/queues/dash-busy/schedulers/hourly/remove",
            "operator"
        )
        .await
        .status,
        404
    );
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn the_job_page_shows_options_trace_stack_and_parent() {
    let redis = TestRedis::new("dash-job");
    let app = with_a_failed_job(&redis).await;
    let q = app.queue::<serde_json::Value>("dash-mail").unwrap();
    let trace = queue_core::trace::TraceContext::new_root();
    q.add(
        "child",
        serde_json::json!({}),
        JobOptions::new()
            .job_id("child-1")
            .attempts(4)
            .backoff(queue_core::Backoff::fixed(Duration::from_millis(250)))
            .timeout(Duration::from_secs(9))
            .trace(trace.clone()),
    )
    .await
    .unwrap();
    // What a Node worker records on failure, and what a flow child carries.
    let mut conn = redis_conn().await;
    let _: () = redis::cmd("HSET")
        .arg(format!("{}:dash-mail:child-1", redis.prefix()))
        .arg("stacktrace")
        .arg(r#"["Error: first <boom>\n    at send (mail.js:1:1)"]"#)
        .arg("parent")
        .arg(format!(
            r#"{{"id":"report-7","queueKey":"{}:dash-report"}}"#,
            redis.prefix()
        ))
        .query_async(&mut conn)
        .await
        .unwrap();
    let addr = serve(&app).await;
    let page = text(&get(addr, "/admin/queues/dash-mail/jobs/child-1", "viewer").await);
    assert!(page.contains(trace.trace_id()), "{page}");
    assert!(
        page.contains("attempts 4, fixed backoff 250 ms, timeout 9.0 s"),
        "{page}"
    );
    assert!(page.contains("Error: first &lt;boom&gt;"), "{page}");
    assert!(
        page.contains(r#"href="/admin/queues/dash-report/jobs/report-7""#),
        "{page}"
    );
}

#[tokio::test]
async fn a_queue_lists_oldest_first_filters_by_name_and_cleans_and_drains() {
    let redis = TestRedis::new("dash-list");
    let app = redis.app(|b| b).await;
    let q = app.queue::<serde_json::Value>("dash-list").unwrap();
    for i in 0..6 {
        let name = if i % 2 == 0 { "even" } else { "odd" };
        q.add(
            name,
            serde_json::json!(i),
            JobOptions::new().job_id(format!("j-{i}")),
        )
        .await
        .unwrap();
    }
    let addr = serve(&app).await;
    let newest = text(&get(addr, "/admin/queues/dash-list", "viewer").await);
    assert_eq!(job_ids(&newest).first(), Some(&"j-5"));
    let oldest = text(&get(addr, "/admin/queues/dash-list?order=oldest", "viewer").await);
    assert_eq!(job_ids(&oldest).first(), Some(&"j-0"));
    let odd = text(
        &get(
            addr,
            "/admin/queues/dash-list?name=odd&order=oldest",
            "viewer",
        )
        .await,
    );
    assert_eq!(job_ids(&odd), ["j-1", "j-3", "j-5"]);
    assert_eq!(
        get(addr, "/admin/queues/dash-list?order=sideways", "viewer")
            .await
            .status,
        400
    );

    // Clean: a bad form is a 400 with the reason; a good one removes.
    let bad = post_form(
        addr,
        "/admin/queues/dash-list/actions/clean",
        "state=active&older_than_s=0",
    )
    .await;
    assert_eq!(bad.status, 400);
    assert!(text(&bad).contains("cannot be cleaned"), "{}", text(&bad));
    let bad_age = post_form(
        addr,
        "/admin/queues/dash-list/actions/clean",
        "state=waiting&older_than_s=soon",
    )
    .await;
    assert_eq!(bad_age.status, 400);
    let missing = post_form(
        addr,
        "/admin/queues/dash-list/actions/clean",
        "state=waiting",
    )
    .await;
    assert_eq!(missing.status, 400, "{}", text(&missing));
    // A clean is confirmed first, with the count of the state's jobs.
    let asked = post_form(
        addr,
        "/admin/queues/dash-list/actions/clean",
        "state=waiting&older_than_s=3600",
    )
    .await;
    assert_eq!(asked.status, 200);
    assert!(
        text(&asked).contains("Of the <strong>6</strong> waiting jobs"),
        "{}",
        text(&asked)
    );
    let cleaned = post_form(
        addr,
        "/admin/queues/dash-list/actions/clean",
        "state=waiting&older_than_s=3600&confirm=yes",
    )
    .await;
    assert_eq!(cleaned.status, 303);
    assert_eq!(
        q.get_job_counts().await.unwrap().waiting,
        6,
        "none is an hour old"
    );
    let asked = get(addr, "/admin/queues/dash-list/actions/drain", "operator").await;
    assert!(
        text(&asked).contains("Remove the <strong>6</strong> waiting and prioritized jobs"),
        "{}",
        text(&asked)
    );
    let unconfirmed = post(addr, "/admin/queues/dash-list/actions/drain", "operator").await;
    assert_eq!(unconfirmed.status, 200, "a drain without confirmation asks");
    assert_eq!(q.get_job_counts().await.unwrap().waiting, 6);
    let drained = post_form(addr, "/admin/queues/dash-list/actions/drain", "confirm=yes").await;
    assert_eq!(drained.status, 303);
    assert_eq!(q.get_job_counts().await.unwrap().waiting, 0);
}

#[derive(Debug, serde::Deserialize)]
struct Welcome {
    #[allow(dead_code)]
    to: String,
}

async fn welcome(job: Job<Welcome>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

#[derive(Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
struct Signup {
    email: String,
    age: u8,
}

#[queue_core::job_queue("dash-declared")]
enum Declared {
    #[job("signup")]
    Signup(Signup),
}

async fn signup(job: Job<Signup>) -> Result<(), JobError> {
    let _ = (&job.data.email, job.data.age);
    Ok(())
}

#[tokio::test]
async fn the_add_form_shows_a_declared_jobs_schema_and_checks_the_json_against_it() {
    let redis = TestRedis::new("dash-schema");
    let app = redis
        .app(|b| b.processor(Processor::of::<Declared>().handle(signup)))
        .await;
    let addr = serve(&app).await;
    let path = "/admin/queues/dash-declared/add";
    let form = text(&get(addr, path, "operator").await);
    assert!(
        form.contains("data of <code>signup</code>") && form.contains("&quot;age&quot;"),
        "{form}"
    );
    let refused = post_form(
        addr,
        path,
        &format!(
            "name=signup&data={}",
            form_encode(r#"{"email": "ada@example.com", "age": 300}"#)
        ),
    )
    .await;
    assert_eq!(refused.status, 400);
    let body = text(&refused);
    assert!(
        body.contains("Does not follow the schema of")
            && body.contains("at `/age`: 300 is above the maximum 255"),
        "{body}"
    );
    let q = app.queue_of::<Declared>().unwrap();
    assert_eq!(q.get_job_counts().await.unwrap().total(), 0);
    let added = post_form(
        addr,
        path,
        &format!(
            "name=signup&data={}&job_id=signup-1",
            form_encode(r#"{"email": "ada@example.com", "age": 30}"#)
        ),
    )
    .await;
    assert_eq!(added.status, 303, "{}", text(&added));
    assert!(q.get_job("signup-1").await.unwrap().is_some());
}

#[tokio::test]
async fn the_add_form_checks_the_json_against_the_handlers_payload_type() {
    let redis = TestRedis::new("dash-add");
    let app = redis
        .app(|b| b.processor(Processor::new("dash-typed").job("welcome", welcome)))
        .await;
    let q = app.queue::<serde_json::Value>("dash-typed").unwrap();
    let addr = serve(&app).await;
    let path = "/admin/queues/dash-typed/add";
    let form = text(&get(addr, path, "operator").await);
    assert!(form.contains(r#"<option value="welcome">"#), "{form}");
    assert_eq!(get(addr, path, "viewer").await.status, 403);

    let field_error = |page: &HttpResponse| -> String {
        let body = text(page);
        body.split("role=\"alert\">")
            .nth(1)
            .and_then(|rest| rest.split("</p>").next())
            .unwrap_or_else(|| panic!("no field error in {body}"))
            .to_owned()
    };
    let encode = |pairs: &[(&str, &str)]| -> String {
        pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", form_encode(v)))
            .collect::<Vec<_>>()
            .join("&")
    };
    for (pairs, expected) in [
        (vec![("name", "welcome"), ("data", "{not json")], "Not JSON"),
        (
            vec![("name", "welcome"), ("data", r#"{"too": "a@b.c"}"#)],
            "missing field `to`",
        ),
        (
            vec![("name", "farewell"), ("data", "{}")],
            "No handler of this app takes `farewell`",
        ),
        (
            vec![
                ("name", "welcome"),
                ("data", r#"{"to": "a@b.c"}"#),
                ("job_id", "w:1"),
            ],
            "contains ':'",
        ),
        (
            vec![
                ("name", "welcome"),
                ("data", r#"{"to": "a@b.c"}"#),
                ("delay_ms", "soon"),
            ],
            "milliseconds",
        ),
    ] {
        let refused = post_form(addr, path, &encode(&pairs)).await;
        assert_eq!(refused.status, 400, "{pairs:?}");
        assert!(
            field_error(&refused).contains(expected),
            "{pairs:?}: {}",
            field_error(&refused)
        );
        // What was typed is kept.
        assert!(
            text(&refused).contains(&super_escape(pairs[1].1)),
            "{pairs:?}"
        );
    }
    assert_eq!(
        q.get_job_counts().await.unwrap().waiting,
        0,
        "nothing was added"
    );

    let added = post_form(
        addr,
        path,
        &encode(&[
            ("name", "welcome"),
            ("data", r#"{"to": "ada@example.com"}"#),
            ("job_id", "typed-1"),
        ]),
    )
    .await;
    assert_eq!(added.status, 303, "{}", text(&added));
    assert_eq!(
        added.header("location"),
        Some("/admin/queues/dash-typed/jobs/typed-1")
    );
    let info = q.get_job("typed-1").await.unwrap().unwrap();
    assert_eq!(info.data, serde_json::json!({"to": "ada@example.com"}));
}

/// `application/x-www-form-urlencoded` encoding of a value.
fn form_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                char::from(b).to_string()
            }
            b' ' => "+".to_owned(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// A value as the page escapes it.
fn super_escape(value: &str) -> String {
    value
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An open server-sent-events response, read as it arrives.
struct Tab {
    stream: tokio::net::TcpStream,
    seen: String,
}

impl Tab {
    async fn open(addr: SocketAddr, path: &str) -> Tab {
        use tokio::io::AsyncWriteExt;
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nx-role: viewer\r\nAccept: text/event-stream\r\n\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut tab = Tab {
            stream,
            seen: String::new(),
        };
        tab.read_until(|seen| seen.contains("\r\n\r\n")).await;
        assert!(tab.seen.starts_with("HTTP/1.1 200"), "{}", tab.seen);
        assert!(tab.seen.contains("text/event-stream"), "{}", tab.seen);
        tab
    }

    /// Reads until `done` holds for all that arrived (within the deadline).
    async fn read_until(&mut self, done: impl Fn(&str) -> bool) {
        use tokio::io::AsyncReadExt;
        let deadline = tokio::time::Instant::now() + SOON;
        let mut buf = [0u8; 4096];
        while !done(&self.seen) {
            let n = tokio::time::timeout_at(deadline, self.stream.read(&mut buf))
                .await
                .unwrap_or_else(|_| panic!("timed out; the stream so far: {}", self.seen))
                .unwrap();
            assert!(n > 0, "the stream ended: {}", self.seen);
            self.seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
}

/// Connections of `redis` blocked reading a stream (a queue-events reader).
async fn stream_readers(redis: &PrivateRedis) -> usize {
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{}", redis.port()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut conn)
        .await
        .unwrap();
    list.lines().filter(|l| l.contains("cmd=xread")).count()
}

#[tokio::test]
async fn ten_tabs_share_one_event_reader_and_see_counts_move() {
    let redis = PrivateRedis::start();
    let app = QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .processor(Processor::new("dash-live").any_job(fails))
        .build()
        .await
        .unwrap();
    let q = app.queue::<serde_json::Value>("dash-live").unwrap();
    let addr = serve(&app).await;
    let mut tabs = Vec::new();
    for _ in 0..10 {
        tabs.push(Tab::open(addr, "/admin/queues/dash-live/live").await);
    }
    queue_tests::wait_until(SOON, "the queue's reader blocks on its stream", || async {
        (stream_readers(&redis).await == 1).then_some(())
    })
    .await;

    q.add(
        "n",
        serde_json::json!({}),
        JobOptions::new().job_id("live-1"),
    )
    .await
    .unwrap();
    for tab in &mut tabs {
        tab.read_until(|seen| seen.contains(r#""waiting":1"#) && seen.contains("live-1"))
            .await;
        assert!(tab.seen.contains("event: update"), "{}", tab.seen);
    }
    assert_eq!(stream_readers(&redis).await, 1, "ten tabs, one reader");

    // The page carries what its script needs.
    let page = text(&get(addr, "/admin/queues/dash-live", "viewer").await);
    assert!(
        page.contains(r#"data-live="/admin/queues/dash-live/live""#),
        "{page}"
    );
    assert!(
        page.contains(r#"<span data-count="waiting">1</span>"#),
        "{page}"
    );
    let script = get(addr, "/admin/queues/-/assets/live.js", "viewer").await;
    assert!(script
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/javascript")));

    // When the last tab closes, the reader stops and lets its connection go.
    drop(tabs);
    queue_tests::wait_until(Duration::from_secs(15), "the reader stops", || async {
        (stream_readers(&redis).await == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_flows_job_page_shows_its_parent_and_children_as_a_tree() {
    use queue_core::OnChildFailure;

    let redis = TestRedis::new("dash-flow");
    let app = redis.app(|b| b).await;
    let reports = app.queue::<serde_json::Value>("dash-reports").unwrap();
    let steps = app.queue::<serde_json::Value>("dash-steps").unwrap();
    let step = |name: &str, id: &str| {
        steps
            .flow_job(name, serde_json::json!({}))
            .options(JobOptions::new().job_id(id))
    };
    // Added through the engine's flow producer, which writes each child's `parent`.
    let flow = reports
        .flow_job("report", serde_json::json!({}))
        .options(JobOptions::new().job_id("report-1"))
        .child(OnChildFailure::FailParent, step("render", "render-1"))
        .child(OnChildFailure::FailParent, step("upload", "upload-1"));
    app.add_flow(flow).await.unwrap();
    // The app knows its queues by use.
    let _ = app.queue::<serde_json::Value>("dash-reports").unwrap();
    let _ = app.queue::<serde_json::Value>("dash-steps").unwrap();
    let addr = serve(&app).await;

    let parent = text(&get(addr, "/admin/queues/dash-reports/jobs/report-1", "viewer").await);
    assert!(parent.contains("waiting-children"), "{parent}");
    for child in ["render-1", "upload-1"] {
        assert!(
            parent.contains(&format!(r#"href="/admin/queues/dash-steps/jobs/{child}""#)),
            "{child} in {parent}"
        );
    }
    let child = text(&get(addr, "/admin/queues/dash-steps/jobs/render-1", "viewer").await);
    assert!(
        child.contains(r#"href="/admin/queues/dash-reports/jobs/report-1""#),
        "the parent, as the engine's flow producer wrote it: {child}"
    );
}

#[tokio::test]
async fn a_flow_parents_page_shows_a_failed_child_with_its_reason() {
    use queue_core::OnChildFailure;

    async fn breaks(_job: Job<()>) -> Result<(), JobError> {
        Err(JobError::unrecoverable(std::io::Error::other(
            "the <renderer> crashed",
        )))
    }
    let redis = TestRedis::new("dash-flow-failed");
    let app = redis
        .app(|b| b.processor(Processor::new("dash-steps").any_job(breaks)))
        .await;
    let reports = app.queue::<()>("dash-reports").unwrap();
    let steps = app.queue::<()>("dash-steps").unwrap();
    let flow = reports
        .flow_job("report", ())
        .options(JobOptions::new().job_id("report-2"))
        .child(
            OnChildFailure::IgnoreDependency,
            steps
                .flow_job("render", ())
                .options(JobOptions::new().job_id("render-2")),
        )
        .child(
            OnChildFailure::FailParent,
            steps.flow_job("upload", ()).options(
                JobOptions::new()
                    .job_id("upload-2")
                    .delay(Duration::from_secs(300)),
            ),
        );
    app.add_flow(flow).await.unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&steps, "render-2", JobState::Failed, SOON).await;
    let addr = serve(&app).await;
    let parent = text(&get(addr, "/admin/queues/dash-reports/jobs/report-2", "viewer").await);
    let failed = parent
        .split("<li>")
        .find(|li| li.contains("render-2"))
        .unwrap_or_else(|| panic!("render-2 in {parent}"));
    assert!(
        failed.contains("chip bad") && failed.contains(">failed<"),
        "{failed}"
    );
    // The reason, escaped.
    assert!(failed.contains("the &lt;renderer&gt; crashed"), "{failed}");
    let pending = parent
        .split("<li>")
        .find(|li| li.contains("upload-2"))
        .unwrap();
    // Each node shows its own state: the pending child waits out its delay.
    assert!(pending.contains(">delayed<"), "{pending}");
    workers.shutdown(SOON).await;
}

/// The numbers in a row of the overview, in column order.
fn overview_cells(page: &str, queue: &str) -> Vec<String> {
    let row = page
        .split("<tr>")
        .find(|r| r.contains(&format!(">{queue}</a>")))
        .unwrap_or_else(|| panic!("no row for {queue}: {page}"));
    row.split("<td class=\"n\">")
        .skip(1)
        .map(|cell| {
            let cell = cell.split("</td>").next().unwrap_or_default();
            // Strip the markup around a number (a link, a red span).
            cell.chars().filter(char::is_ascii_digit).collect()
        })
        .collect()
}

#[tokio::test]
async fn bull_board_and_ours_agree_on_counts_and_job_fields() {
    board_agrees(queue_tests::node::Bullmq::V5).await;
}

/// Bull Board over Node BullMQ 6's `Queue` (the adapter Node teams on 6 mount).
#[tokio::test]
async fn bull_board_on_bullmq6_and_ours_agree_on_counts_and_job_fields() {
    board_agrees(queue_tests::node::Bullmq::V6).await;
}

async fn board_agrees(bullmq: queue_tests::node::Bullmq) {
    let redis = TestRedis::new(&format!("dash-board-{}", bullmq.major()));
    let app = redis
        .app(|b| b.processor(Processor::new("dash-agree").any_job(fails)))
        .await;
    let q = app.queue::<serde_json::Value>("dash-agree").unwrap();
    let workers = app.start_workers().await.unwrap();
    for i in 0..3 {
        q.add(
            "welcome",
            serde_json::json!({"fail": true, "n": i}),
            JobOptions::new().job_id(format!("bad-{i}")),
        )
        .await
        .unwrap();
        wait_for_state(&q, &format!("bad-{i}"), JobState::Failed, SOON).await;
    }
    q.add(
        "welcome",
        serde_json::json!({}),
        JobOptions::new().job_id("good-1"),
    )
    .await
    .unwrap();
    wait_for_state(&q, "good-1", JobState::Completed, SOON).await;
    workers.shutdown(SOON).await;
    q.add(
        "later",
        serde_json::json!({}),
        JobOptions::new().delay(Duration::from_secs(3600)),
    )
    .await
    .unwrap();
    q.add("now", serde_json::json!({}), JobOptions::new().priority(5))
        .await
        .unwrap();
    q.add("next", serde_json::json!({}), JobOptions::new())
        .await
        .unwrap();

    let lines = bullmq
        .run(redis.prefix(), &["board", "dash-agree", "failed"])
        .await;
    let board = lines.last().expect("Bull Board's view").clone();
    let addr = serve(&app).await;
    let overview = text(&get(addr, "/admin/queues", "viewer").await);
    let cells = overview_cells(&overview, "dash-agree");
    // Our columns: waiting, prioritized, delayed, active, waiting-children, completed,
    // failed, then workers and schedulers.
    let ours = |i: usize| cells[i].parse::<u64>().unwrap();
    let theirs = |state: &str| board["counts"][state].as_u64().unwrap();
    for (i, state) in [
        "waiting",
        "prioritized",
        "delayed",
        "active",
        "waiting-children",
        "completed",
        "failed",
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(
            ours(i),
            theirs(state),
            "{state}: ours {cells:?}, Bull Board {}",
            board["counts"]
        );
    }
    assert_eq!(board["isPaused"], false);
    assert_eq!(board["jobSchedulerCount"], 0);

    // The failed jobs: the same ids in the same order, with the same reasons and
    // attempts, and the same added time.
    let page = text(&get(addr, "/admin/queues/dash-agree?state=failed", "viewer").await);
    let our_ids = job_ids(&page);
    let their_jobs = board["jobs"].as_array().unwrap();
    let their_ids: Vec<&str> = their_jobs
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(our_ids, their_ids);
    for job in their_jobs {
        let id = job["id"].as_str().unwrap();
        let ours = text(
            &get(
                addr,
                &format!("/admin/queues/dash-agree/jobs/{id}"),
                "operator",
            )
            .await,
        );
        let reason = job["failedReason"].as_str().unwrap();
        assert!(ours.contains(&super_escape(reason)), "{id}: {reason}");
        assert!(
            ours.contains(&format!("<p>{} made of", job["attempts"])),
            "{id}: attempts {}",
            job["attempts"]
        );
        let info = q.get_job(id).await.unwrap().unwrap();
        assert_eq!(
            Some(info.timestamp_ms),
            job["timestamp"].as_u64(),
            "{id}: added"
        );
        assert_eq!(job["data"], info.data, "{id}: the payload both read");
    }
    // Paused, both say so.
    q.pause().await.unwrap();
    let lines = bullmq
        .run(redis.prefix(), &["board", "dash-agree", "waiting"])
        .await;
    let board = lines.last().unwrap().clone();
    assert_eq!(board["isPaused"], true);
    let overview = text(&get(addr, "/admin/queues", "viewer").await);
    assert!(overview.contains("paused"), "{overview}");
    // A paused queue's waiting jobs: Bull Board counts them under `paused` (through
    // Node 5) or `waiting` (Node 6); ours counts them as waiting, flagged paused.
    let cells = overview_cells(&overview, "dash-agree");
    // Node 6 has no `paused` list, and Bull Board then no such count.
    let paused = board["counts"]["paused"].as_u64();
    assert_eq!(
        paused.is_none(),
        bullmq == queue_tests::node::Bullmq::V6,
        "{}",
        board["counts"]
    );
    let waiting_then = board["counts"]["waiting"].as_u64().unwrap() + paused.unwrap_or(0);
    assert_eq!(
        cells[0].parse::<u64>().unwrap(),
        waiting_then,
        "{cells:?} vs {}",
        board["counts"]
    );
}

#[tokio::test]
async fn operators_promote_one_or_all_delayed_and_retry_every_failed_job() {
    let redis = TestRedis::new("dash-bulk");
    let app = with_a_failed_job(&redis).await;
    let q = app.queue::<serde_json::Value>("dash-mail").unwrap();
    for i in 0..3 {
        q.add(
            "later",
            serde_json::json!({}),
            JobOptions::new()
                .job_id(format!("later-{i}"))
                .delay(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    }
    let addr = serve(&app).await;
    let base = "/admin/queues/dash-mail";

    let one = post(addr, &format!("{base}/jobs/later-0/promote"), "operator").await;
    assert_eq!(one.status, 303);
    assert_eq!(
        q.get_job_state("later-0").await.unwrap(),
        Some(JobState::Waiting)
    );
    // Promoting it again: it is not delayed any more.
    let again = post(addr, &format!("{base}/jobs/later-0/promote"), "operator").await;
    assert_eq!(again.status, 409, "{}", text(&again));
    let page = text(&get(addr, base, "operator").await);
    assert!(
        page.contains("actions/promote-delayed") && page.contains("actions/retry-failed"),
        "{page}"
    );
    assert_eq!(
        post(addr, &format!("{base}/actions/promote-delayed"), "operator")
            .await
            .status,
        303
    );
    assert_eq!(q.get_job_counts().await.unwrap().delayed, 0);
    // Retrying every failed job is confirmed first, with the count.
    let asked = post(addr, &format!("{base}/actions/retry-failed"), "operator").await;
    assert_eq!(asked.status, 200);
    assert!(
        text(&asked).contains("Move the <strong>"),
        "{}",
        text(&asked)
    );
    assert_eq!(
        post_form(addr, &format!("{base}/actions/retry-failed"), "confirm=yes")
            .await
            .status,
        303
    );
    let counts = q.get_job_counts().await.unwrap();
    assert_eq!((counts.failed, counts.waiting), (0, 5), "{counts:?}");
}

#[tokio::test]
async fn live_pages_recover_after_redis_restarts() {
    let mut redis = PrivateRedis::start();
    let app = QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .command_timeout(Duration::from_secs(1))
        .processor(Processor::new("dash-restart").any_job(fails))
        .build()
        .await
        .unwrap();
    let q = app.queue::<serde_json::Value>("dash-restart").unwrap();
    let addr = serve(&app).await;
    let mut before = Tab::open(addr, "/admin/queues/dash-restart/live").await;
    queue_tests::wait_until(SOON, "the reader blocks on its stream", || async {
        (stream_readers(&redis).await == 1).then_some(())
    })
    .await;
    redis.restart();
    queue_tests::wait_until(
        Duration::from_secs(20),
        "an add after the restart",
        || async {
            q.add("n", serde_json::json!({}), JobOptions::new())
                .await
                .ok()
        },
    )
    .await;
    // The tab that watched through the outage and one opened after it both follow the
    // queue again, through one reader.
    let mut after = Tab::open(addr, "/admin/queues/dash-restart/live").await;
    queue_tests::wait_until(
        Duration::from_secs(20),
        "the reader after the restart",
        || async { (stream_readers(&redis).await == 1).then_some(()) },
    )
    .await;
    let added = q
        .add("n", serde_json::json!({}), JobOptions::new())
        .await
        .unwrap();
    after.read_until(|seen| seen.contains(&added.id)).await;
    before.read_until(|seen| seen.contains(&added.id)).await;
}

/// The ids of the jobs a page links to, in order.
fn job_ids(page: &str) -> Vec<&str> {
    page.split("/jobs/")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .collect()
}
