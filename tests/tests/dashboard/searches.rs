//! A search costs Redis a scan of up to thousands of jobs (about 23 ms a view), so the
//! dashboard bounds it per person: one search at a time and a number a minute, over
//! which it answers 429 with `Retry-After`; and searching payload fields, which decodes
//! every scanned payload in Redis, is off unless the application turns it on.

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::request::Parts;
use queue_core::{Job, JobError, JobOptions, Processor, QueueApp};
use queue_dashboard::{Access, Dashboard};
use queue_tests::http::{request, HttpResponse};
use queue_tests::{PrivateRedis, TestRedis, SOON};

use crate::audit::audit_log;
use crate::support::{serve_dashboard as serve, text};

/// The `x-operator` header names the operator; without it the viewer is nobody in
/// particular (the policy gives no name).
fn policy(request: &Parts) -> Access {
    match request
        .headers
        .get("x-operator")
        .and_then(|v| v.to_str().ok())
    {
        Some(who) => Access::operator(who).with_payloads(),
        None => Access::read_only(""),
    }
}

async fn ok(_: Job<serde_json::Value>) -> Result<(), JobError> {
    Ok(())
}

/// GET `path` as `who` (`None`: without a name).
async fn get(addr: SocketAddr, path: &str, who: Option<&str>) -> HttpResponse {
    let headers: Vec<(&str, &str)> = who.map(|w| ("x-operator", w)).into_iter().collect();
    request(addr, "GET", path, &headers, b"")
        .await
        .expect("request")
}

/// `count` waiting jobs `job-0` .. of `queue`, payload `{"n": i}`.
async fn fill(app: &QueueApp, queue: &str, count: usize) {
    let q = app.queue::<serde_json::Value>(queue).unwrap();
    for n in 0..count {
        q.add(
            "welcome",
            serde_json::json!({ "n": n }),
            JobOptions::new().job_id(format!("job-{n}")),
        )
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn a_payload_field_search_is_off_unless_the_application_turns_it_on() {
    let redis = TestRedis::new("dash-payload-search");
    let app = redis
        .app(|b| b.processor(Processor::new("dash-fields").any_job(ok)))
        .await;
    fill(&app, "dash-fields", 5).await;
    let off = serve(Dashboard::new(&app, policy)).await;
    let field = "/admin/queues/dash-fields?q=data.n%20%3D%203";

    let refused = get(off, field, Some("olga")).await;
    assert_eq!(refused.status, 400, "{}", text(&refused));
    let says = text(&refused);
    assert!(
        says.contains("off") && says.contains("payload_search(true)"),
        "says it is off and how to turn it on: {says}"
    );
    // The other searches keep working, and the box offers only them.
    for path in [
        "/admin/queues/dash-fields?q=job-",
        "/admin/queues/dash-fields?q=name%20%3D%20welcome",
        "/admin/queues/dash-fields?name=welcome",
    ] {
        let page = get(off, path, Some("olga")).await;
        assert_eq!(page.status, 200, "{path}: {}", text(&page));
        assert!(text(&page).contains("data-job=\"job-3\""), "{path}");
        assert!(!text(&page).contains("data.user_id"), "{path}");
    }

    let on = serve(Dashboard::new(&app, policy).payload_search(true)).await;
    let found = get(on, field, Some("olga")).await;
    assert_eq!(found.status, 200, "{}", text(&found));
    assert!(text(&found).contains("data-job=\"job-3\""));
    assert!(!text(&found).contains("data-job=\"job-2\""));
    assert!(text(&found).contains("data.user_id"), "the box offers it");
    // Not to a viewer the policy shows no payloads: matches would tell their values.
    let viewer = get(on, field, None).await;
    assert_eq!(viewer.status, 400, "{}", text(&viewer));
}

#[tokio::test]
async fn each_operator_has_a_search_rate_and_over_it_gets_a_429_page_with_retry_after() {
    let events = audit_log();
    let redis = TestRedis::new("dash-search-rate");
    let app = redis
        .app(|b| b.processor(Processor::new("dash-rate").any_job(ok)))
        .await;
    fill(&app, "dash-rate", 3).await;
    let addr = serve(Dashboard::new(&app, policy).max_searches_per_minute(3)).await;
    let searches = [
        "/admin/queues/dash-rate?q=job-",
        "/admin/queues/dash-rate?q=name%20%3D%20welcome",
        "/admin/queues/dash-rate?state=waiting&name=welcome",
    ];
    for path in searches {
        assert_eq!(get(addr, path, Some("olga")).await.status, 200, "{path}");
    }
    let over = get(addr, searches[0], Some("olga")).await;
    assert_eq!(over.status, 429, "{}", text(&over));
    // Three a minute: the next one in at most 20 s.
    let retry_after: u64 = over
        .header("retry-after")
        .and_then(|s| s.parse().ok())
        .expect("a Retry-After in seconds");
    assert!((1..=20).contains(&retry_after), "{retry_after}");
    let says = text(&over);
    assert!(
        says.contains("3 searches a minute") && says.contains("Try again in"),
        "a page that says why and when: {says}"
    );
    assert!(
        says.contains("<h1>429</h1>"),
        "the dashboard's page: {says}"
    );
    // A bad search costs nothing and is refused as bad, not as too many.
    let bad = get(
        addr,
        "/admin/queues/dash-rate?q=priority%20%3D%201",
        Some("olga"),
    )
    .await;
    assert_eq!(bad.status, 400);

    // Pages without a search, and other people's searches, go on.
    for path in [
        "/admin/queues/dash-rate",
        "/admin/queues/dash-rate/jobs/job-1",
    ] {
        assert_eq!(get(addr, path, Some("olga")).await.status, 200, "{path}");
    }
    assert_eq!(get(addr, searches[0], Some("oscar")).await.status, 200);
    // Viewers without a name share one bucket (their peer's: all of them come from
    // 127.0.0.1 here), apart from the named operators'.
    for path in searches {
        assert_eq!(get(addr, path, None).await.status, 200, "{path}");
    }
    assert_eq!(get(addr, searches[1], None).await.status, 429);

    // Reads are not actions: nothing of this is audited.
    let logged = events.lock().unwrap().clone();
    assert!(
        !logged.iter().any(|l| l.contains("dash-rate")),
        "{logged:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_runs_one_search_at_a_time() {
    let redis = PrivateRedis::start();
    let app = QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .prefix("solo")
        // Redis is frozen below for a moment; its commands must wait, not time out.
        .command_timeout(Duration::from_secs(30))
        .processor(Processor::new("dash-solo").any_job(ok))
        .build()
        .await
        .unwrap();
    fill(&app, "dash-solo", 3).await;
    let addr = serve(Dashboard::new(&app, policy)).await;
    let search = "/admin/queues/dash-solo?q=job-";
    assert_eq!(get(addr, search, Some("olga")).await.status, 200);

    // A hung Redis holds a search running as long as the test wants: olga's second
    // search, sent beside the first, is answered at once.
    redis.freeze();
    let mut first = tokio::spawn(async move { get(addr, search, Some("olga")).await });
    let mut second = tokio::spawn(async move { get(addr, search, Some("olga")).await });
    let oscar = tokio::spawn(async move { get(addr, search, Some("oscar")).await });
    let answered = tokio::time::timeout(SOON, async {
        tokio::select! {
            answer = &mut first => (answer, true),
            answer = &mut second => (answer, false),
        }
    })
    .await;
    redis.thaw();
    let (refused, first_answered) = answered.expect("one of the two is answered while Redis hangs");
    let refused = refused.unwrap();
    let running = if first_answered { second } else { first };
    assert_eq!(refused.status, 429, "{}", text(&refused));
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert!(
        text(&refused).contains("one search at a time"),
        "{}",
        text(&refused)
    );
    // The other one, and oscar's beside it, ran.
    assert_eq!(running.await.unwrap().status, 200);
    assert_eq!(oscar.await.unwrap().status, 200);
    // A finished search gives its place back.
    assert_eq!(get(addr, search, Some("olga")).await.status, 200);
}
