//! The dashboard's pages as an operator uses them: the attempt history of a retrying
//! job, a flow's whole tree, search, the URL rules (trailing slashes, HTML 404s), and
//! what a hostile client cannot do (a forwarded prefix from anyone but the trusted
//! proxy, a cross-site read).

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::{serve_dashboard, text};
use axum::http::request::Parts;
use queue_core::{
    Backoff, Job, JobError, JobOptions, JobState, OnChildFailure, Processor, QueueApp,
};
use queue_dashboard::{Access, Dashboard};
use queue_tests::http::{request, HttpResponse};
use queue_tests::{wait_for_state, TestRedis, SOON};

fn operator(_: &Parts) -> Access {
    Access::operator("olga").with_payloads()
}

/// The dashboard at `/admin/queues`, served with the peer's address (which the trusted
/// proxy check reads), believing forwarded prefixes from `trusted`.
async fn serve(app: &QueueApp, trusted: &[&str]) -> SocketAddr {
    let dashboard = Dashboard::new(app, operator)
        .trust_forwarded_prefix_from(trusted.iter().map(|ip| ip.parse().unwrap()))
        // The search test looks into payloads, which is off by default.
        .payload_search(true);
    serve_dashboard(dashboard).await
}

async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> HttpResponse {
    request(addr, "GET", path, headers, b"")
        .await
        .expect("request")
}

async fn ok(_: Job<serde_json::Value>) -> Result<(), JobError> {
    Ok(())
}

async fn always_fails(_: Job<serde_json::Value>) -> Result<(), JobError> {
    Err(JobError::from(std::io::Error::other("smtp refused <rcpt>")))
}

#[tokio::test]
async fn forwarded_prefixes_are_believed_only_from_the_trusted_proxy_and_only_as_a_path() {
    let redis = TestRedis::new("dash-prefix");
    let app = redis
        .app(|b| b.processor(Processor::new("dash-px").any_job(ok)))
        .await;
    let (trusting, distrusting) = (serve(&app, &["127.0.0.1"]).await, serve(&app, &[]).await);
    let from = |prefix: &'static str| vec![("x-forwarded-prefix", prefix)];

    let behind = text(&get(trusting, "/admin/queues", &from("/ops")).await);
    assert!(
        behind.contains(r#"href="/ops/admin/queues/dash-px""#),
        "{behind}"
    );
    assert!(behind.contains(r#"src="/ops/admin/queues/-/assets/live.js""#));
    let slash = get(trusting, "/admin/queues/dash-px/", &from("/ops")).await;
    assert_eq!(slash.header("location"), Some("/ops/admin/queues/dash-px"));

    // Not a plain path: ignored, in links, scripts and redirects alike.
    for hostile in [
        "//evil.example",
        "/\"><script>alert(1)</script>",
        "https://evil.example",
        "/a/../b",
    ] {
        let page = text(
            &get(
                trusting,
                "/admin/queues",
                &[("x-forwarded-prefix", hostile)],
            )
            .await,
        );
        assert!(
            page.contains(r#"src="/admin/queues/-/assets/live.js""#),
            "{hostile}: {page}"
        );
        assert!(
            !page.contains("evil") && !page.contains("alert(1)"),
            "{hostile}: {page}"
        );
        let slash = get(
            trusting,
            "/admin/queues/dash-px/",
            &[("x-forwarded-prefix", hostile)],
        )
        .await;
        assert_eq!(
            slash.header("location"),
            Some("/admin/queues/dash-px"),
            "{hostile}"
        );
    }
    // From anyone but the trusted proxy, even a plain path is ignored.
    let direct = text(&get(distrusting, "/admin/queues", &from("/ops")).await);
    assert!(
        direct.contains(r#"href="/admin/queues/dash-px""#),
        "{direct}"
    );
    assert!(!direct.contains("/ops"), "{direct}");
}

#[tokio::test]
async fn urls_have_one_word_a_level_trailing_slashes_redirect_and_404s_are_pages() {
    let redis = TestRedis::new("dash-urls");
    let app = redis
        .app(|b| b.processor(Processor::new("dash-url").any_job(ok)))
        .await;
    let q = app.queue::<serde_json::Value>("dash-url").unwrap();
    q.add(
        "x",
        serde_json::json!({}),
        JobOptions::new().job_id("url-42"),
    )
    .await
    .unwrap();
    let addr = serve(&app, &[]).await;
    assert_eq!(
        get(addr, "/admin/queues/dash-url/jobs/url-42", &[])
            .await
            .status,
        200
    );
    for (from, to) in [
        ("/admin/queues/", "/admin/queues"),
        ("/admin/queues/dash-url/", "/admin/queues/dash-url"),
        (
            "/admin/queues/dash-url/?state=failed",
            "/admin/queues/dash-url?state=failed",
        ),
        (
            "/admin/queues/dash-url/jobs/url-42/",
            "/admin/queues/dash-url/jobs/url-42",
        ),
    ] {
        let moved = get(addr, from, &[]).await;
        assert_eq!(moved.status, 308, "{from}");
        assert_eq!(moved.header("location"), Some(to), "{from}");
    }
    // A redirect never names another host (`//evil.example` would, to a browser).
    let odd = get(addr, "/admin/queues//evil.example/", &[]).await;
    assert_eq!(odd.header("location"), Some("/admin/queues/evil.example"));
    let missing = get(addr, "/admin/queues/dash-url/no/such/page", &[]).await;
    assert_eq!(missing.status, 404);
    assert!(missing
        .header("content-type")
        .unwrap_or_default()
        .starts_with("text/html"));
    assert!(
        text(&missing).contains(r#"href="/admin/queues""#),
        "the way home"
    );

    // A browser without fetch metadata names another site's `fetch` in `Origin`:
    // refused too.
    let foreign = [("origin", "https://evil.example")];
    assert_eq!(
        get(addr, "/admin/queues/dash-url/jobs/url-42", &foreign)
            .await
            .status,
        403
    );

    // Another site may link to a page (a person follows it), not load it.
    let linked = [
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-mode", "navigate"),
        ("sec-fetch-dest", "document"),
    ];
    assert_eq!(
        get(addr, "/admin/queues/dash-url", &linked).await.status,
        200
    );
    for (mode, dest) in [
        ("cors", "empty"),
        ("no-cors", "image"),
        ("navigate", "iframe"),
    ] {
        let read = [
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", mode),
            ("sec-fetch-dest", dest),
        ];
        for path in [
            "/admin/queues/dash-url/jobs/url-42",
            "/admin/queues/dash-url/live",
        ] {
            assert_eq!(
                get(addr, path, &read).await.status,
                403,
                "{mode} {dest} {path}"
            );
        }
    }
}

#[tokio::test]
async fn search_finds_by_id_prefix_name_and_payload_field_and_says_how_far_it_got() {
    let redis = TestRedis::new("dash-search");
    let app = redis
        .app(|b| b.processor(Processor::new("dash-find").any_job(ok)))
        .await;
    let q = app.queue::<serde_json::Value>("dash-find").unwrap();
    for i in 0..30 {
        let name = if i % 3 == 0 { "welcome" } else { "reminder" };
        q.add(
            name,
            serde_json::json!({ "user": { "id": i }, "email": format!("u{i}@example.com") }),
            JobOptions::new().job_id(format!("mail-{i}")),
        )
        .await
        .unwrap();
    }
    let addr = serve(&app, &[]).await;
    let ids = |page: &str| -> Vec<String> {
        page.split("data-job=\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next().map(str::to_owned))
            .collect()
    };
    let search = |q: &'static str| async move {
        let path = format!("/admin/queues/dash-find?q={q}");
        let page = get(addr, &path, &[]).await;
        assert_eq!(page.status, 200, "{q}");
        text(&page)
    };
    let by_prefix = search("mail-2").await;
    assert_eq!(
        ids(&by_prefix),
        [
            "mail-29", "mail-28", "mail-27", "mail-26", "mail-25", "mail-24", "mail-23", "mail-22",
            "mail-21", "mail-20", "mail-2"
        ]
    );
    assert!(
        by_prefix.contains("11 matches among jobs 1–30 of 30 waiting"),
        "{by_prefix}"
    );
    assert!(by_prefix.contains("the whole state was searched"));
    let by_name = search("name%20%3D%20welcome").await;
    assert_eq!(ids(&by_name).len(), 10, "{by_name}");
    let by_field = search("data.user.id%20%3D%207").await;
    assert_eq!(ids(&by_field), ["mail-7"]);
    // Text matches text; a number typed matches the stored string of the same text.
    let by_email = search("data.email%20%3D%20u12%40example.com").await;
    assert_eq!(ids(&by_email), ["mail-12"]);
    let bad = get(addr, "/admin/queues/dash-find?q=priority%20%3D%201", &[]).await;
    assert_eq!(bad.status, 400);

    // Where a search stops, it says so and offers to go on from there.
    let from = get(addr, "/admin/queues/dash-find?q=mail-&from=25", &[]).await;
    let from = text(&from);
    assert_eq!(ids(&from).len(), 5, "{from}");
    assert!(from.contains("5 matches among jobs 26–30"), "{from}");
}

#[tokio::test]
async fn a_retrying_jobs_page_shows_each_failure_the_next_attempt_and_durations() {
    let redis = TestRedis::new("dash-attempts");
    let app = redis
        .app(|b| b.processor(Processor::new("dash-retry").any_job(always_fails)))
        .await;
    let q = app.queue::<serde_json::Value>("dash-retry").unwrap();
    q.add(
        "welcome",
        serde_json::json!({}),
        JobOptions::new()
            .job_id("retry-1")
            .attempts(3)
            .backoff(Backoff::fixed(Duration::from_secs(3600))),
    )
    .await
    .unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&q, "retry-1", JobState::Delayed, SOON).await;
    workers.shutdown(SOON).await;
    let addr = serve(&app, &[]).await;
    let page = text(&get(addr, "/admin/queues/dash-retry/jobs/retry-1", &[]).await);
    assert!(page.contains("1 made of 3 allowed"), "{page}");
    assert!(page.contains("next attempt"), "{page}");
    assert!(page.contains("(attempt 2 of 3)"), "{page}");
    // The backoff: an hour from the failure, as the delayed set says.
    assert!(
        page.contains("(in 59 min") || page.contains("(in 1 h)"),
        "{page}"
    );
    assert!(page.contains("queued for"), "{page}");
    assert!(page.contains("smtp refused &lt;rcpt&gt;"), "{page}");
}

#[tokio::test]
async fn a_flows_page_shows_the_whole_tree_from_its_root_with_each_state() {
    let redis = TestRedis::new("dash-tree");
    let app = redis
        .app(|b| b.processor(Processor::new("dash-steps").any_job(ok)))
        .await;
    let steps = app.queue::<serde_json::Value>("dash-steps").unwrap();
    let job = |name: &str| {
        steps
            .flow_job(name, serde_json::json!({ "month": "2026-11" }))
            .options(JobOptions::new().job_id(format!("{name}-2026-11")))
    };
    // The monthly report's four steps: each the parent of the one before it.
    let flow = job("notify").child(
        OnChildFailure::FailParent,
        job("upload").child(
            OnChildFailure::FailParent,
            job("render").child(OnChildFailure::FailParent, job("aggregate")),
        ),
    );
    app.add_flow(flow).await.unwrap();
    let addr = serve(&app, &[]).await;
    // From the deepest step, the tree is read from its root down.
    let page = text(&get(addr, "/admin/queues/dash-steps/jobs/aggregate-2026-11", &[]).await);
    let tree = page
        .split("<ul class=\"tree\">")
        .nth(1)
        .unwrap_or_else(|| panic!("{page}"));
    let order: Vec<usize> = ["notify", "upload", "render", "aggregate"]
        .iter()
        .map(|step| {
            tree.find(&format!(">{step}-2026-11<"))
                .unwrap_or_else(|| panic!("{step}: {tree}"))
        })
        .collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "root first: {order:?}"
    );
    assert_eq!(
        tree.matches("<ul>").count(),
        3,
        "three levels below the root: {tree}"
    );
    assert!(
        tree.contains("<strong><a href=\"/admin/queues/dash-steps/jobs/aggregate-2026-11\""),
        "{tree}"
    );
    assert_eq!(tree.matches(">waiting-children<").count(), 3, "{tree}");
    assert_eq!(tree.matches(">waiting<").count(), 1, "{tree}");
}

#[tokio::test]
async fn the_workers_page_shows_each_process_its_host_pid_queues_and_concurrency() {
    let redis = TestRedis::new("dash-roster");
    let app = redis
        .app(|b| {
            b.process_roster(true)
                .processor(Processor::new("dash-work").concurrency(3).any_job(ok))
                .processor(Processor::new("dash-idle").any_job(ok))
        })
        .await;
    let workers = app.start_workers().await.unwrap();
    let addr = serve(&app, &[]).await;
    let page = text(&get(addr, "/admin/queues/-/workers", &[]).await);
    let pid = format!("<td class=\"n\">{}</td>", std::process::id());
    assert!(page.contains(&pid), "{page}");
    assert!(
        page.contains(
            r#"<a href="/admin/queues/dash-work">dash-work</a> <span class="chip">0 / 3</span>"#
        ),
        "{page}"
    );
    // The connections by their queue's name, not BullMQ's base64.
    assert!(
        page.contains("Connections") && !page.contains("ZGFzaC13b3Jr"),
        "{page}"
    );
    // Narrowed to a queue.
    let idle = text(&get(addr, "/admin/queues/-/workers?queue=dash-idle", &[]).await);
    assert!(
        idle.contains("dash-idle</a> <span class=\"chip\">0 / 1</span>"),
        "{idle}"
    );
    assert!(!idle.contains(">dash-work<"), "{idle}");
    workers.shutdown(SOON).await;
}
