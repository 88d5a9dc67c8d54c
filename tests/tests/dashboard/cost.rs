//! The dashboard is cheap by construction: each page costs Redis the same number of
//! commands on a queue of 100,000 jobs as on one of 10, and on 2,000 groups as on 60,
//! and a listing reads cut strings, so jobs with megabyte names make a small page. Counted on a private Redis
//! (its `MONITOR` feed), which nothing else talks to: the commands the dashboard sends,
//! and, bounded by a page or a search's stated scan, those its scripts run.

use std::net::SocketAddr;

use axum::http::request::Parts;
use axum::Router;
use queue_core::{
    group::GroupLimits, queue::BulkJob, Job, JobError, JobOptions, Processor, QueueApp,
};
use queue_dashboard::{Access, Dashboard};
use queue_tests::http::{listener, request};
use queue_tests::PrivateRedis;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const QUEUE: &str = "cost";

fn operator(_: &Parts) -> Access {
    Access::operator("olga").with_payloads()
}

async fn ok(_: Job<serde_json::Value>) -> Result<(), JobError> {
    Ok(())
}

async fn app(redis: &PrivateRedis, prefix: &str) -> QueueApp {
    QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .prefix(prefix)
        .processor(Processor::new(QUEUE).any_job(ok))
        .build()
        .await
        .unwrap()
}

async fn serve(app: &QueueApp) -> SocketAddr {
    let (listener, addr) = listener().await;
    // Payload search on: it is the costliest page, and its bound is what is counted.
    let dashboard = Dashboard::new(app, operator).payload_search(true);
    let router: Router = Router::new().merge(dashboard.mount("/admin/queues"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// `jobs` waiting jobs `job-0` .. (named `even`/`odd`, payload `{"n": i}`).
async fn fill(app: &QueueApp, jobs: usize) {
    let q = app.queue::<serde_json::Value>(QUEUE).unwrap();
    let mut i = 0;
    while i < jobs {
        let bulk = (i..jobs.min(i + 1_000))
            .map(|n| {
                BulkJob::new(
                    if n % 2 == 0 { "even" } else { "odd" },
                    serde_json::json!({ "n": n }),
                )
                .options(JobOptions::new().job_id(format!("job-{n}")))
            })
            .collect();
        q.add_bulk(bulk).await.unwrap();
        i += 1_000;
    }
}

/// Redis's `MONITOR` feed: every command the server runs, the ones a script runs
/// marked `[0 lua]`.
struct Monitor {
    stream: tokio::net::TcpStream,
    pending: String,
}

impl Monitor {
    async fn start(port: u16) -> Monitor {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        stream.write_all(b"MONITOR\r\n").await.unwrap();
        let mut monitor = Monitor {
            stream,
            pending: String::new(),
        };
        monitor.line().await;
        monitor
    }

    async fn line(&mut self) -> String {
        loop {
            if let Some(end) = self.pending.find("\r\n") {
                let line = self.pending[..end].to_owned();
                self.pending.drain(..end + 2);
                return line;
            }
            let mut buf = vec![0u8; 64 * 1024];
            let n = tokio::time::timeout(queue_tests::SOON, self.stream.read(&mut buf))
                .await
                .expect("MONITOR answers")
                .unwrap();
            assert!(n > 0, "MONITOR closed");
            self.pending.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }

    /// The commands seen until the `ECHO` of `marker`: (sent by clients, run by scripts).
    async fn until(&mut self, marker: &str) -> (u64, u64) {
        let (mut clients, mut scripts) = (0, 0);
        loop {
            let line = self.line().await;
            if line.contains(marker) {
                return (clients, scripts);
            }
            if line.contains(" lua] ") {
                scripts += 1;
            } else {
                clients += 1;
            }
        }
    }
}

/// The commands one view of `path` cost Redis, sent by the dashboard and run by its
/// scripts: the least of three views (anything else running only adds).
async fn cost(
    addr: SocketAddr,
    conn: &mut redis::aio::MultiplexedConnection,
    monitor: &mut Monitor,
    path: &str,
) -> (u64, u64) {
    let mut least = (u64::MAX, u64::MAX);
    for round in 0..3 {
        let marker = format!("view-{}-{round}-{path}", addr.port());
        let _: String = redis::cmd("ECHO")
            .arg(format!("{marker}-start"))
            .query_async(conn)
            .await
            .unwrap();
        monitor.until(&format!("{marker}-start")).await;
        let page = request(addr, "GET", path, &[], b"").await.unwrap();
        assert!(page.status < 400, "{path}: {}", page.status);
        let _: String = redis::cmd("ECHO")
            .arg(format!("{marker}-end"))
            .query_async(conn)
            .await
            .unwrap();
        let seen = monitor.until(&format!("{marker}-end")).await;
        least = least.min(seen);
    }
    least
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_costs_the_same_commands_on_100000_jobs_as_on_10() {
    let redis = PrivateRedis::start();
    let (big, small) = (app(&redis, "big").await, app(&redis, "small").await);
    tokio::join!(fill(&big, 100_000), fill(&small, 10));
    let (big_addr, small_addr) = (serve(&big).await, serve(&small).await);
    let client = redis::Client::open(format!("redis://127.0.0.1:{}", redis.port())).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut monitor = Monitor::start(redis.port()).await;
    let pages = [
        "/admin/queues",
        "/admin/queues/cost",
        "/admin/queues/cost?state=waiting&page=2",
        "/admin/queues/cost?state=waiting&order=oldest",
        "/admin/queues/cost?q=job-5",
        "/admin/queues/cost?q=name%20%3D%20odd",
        "/admin/queues/cost?q=data.n%20%3D%205",
        "/admin/queues/cost/jobs/job-5",
        "/admin/queues/cost/schedulers",
        "/admin/queues/cost/groups",
        "/admin/queues/-/workers",
        "/admin/queues/cost/actions/drain",
    ];
    let mut seen = Vec::new();
    for path in pages {
        let (on_big, in_scripts) = cost(big_addr, &mut conn, &mut monitor, path).await;
        let (on_small, in_small_scripts) = cost(small_addr, &mut conn, &mut monitor, path).await;
        seen.push(format!(
            "{path}: {on_big} / {on_small} sent, {in_scripts} / {in_small_scripts} in scripts"
        ));
        assert_eq!(on_big, on_small, "{path}: 100,000 jobs against 10");
        assert!(on_big <= 40, "{path}: {on_big} commands");
        // What scripts run is bounded by a page, or by a search's stated scan (5,000
        // jobs, two O(1) reads each for a payload field).
        assert!(
            in_scripts <= 10_100,
            "{path}: {in_scripts} commands in scripts"
        );
    }
    println!(
        "commands per view, 100,000 jobs / 10 jobs:\n{}",
        seen.join("\n")
    );
}

/// `count` groups `g-0000` .. with limits of their own.
async fn groups(app: &QueueApp, count: usize) {
    let q = app.queue::<serde_json::Value>(QUEUE).unwrap();
    for n in 0..count {
        q.set_group_limits(&format!("g-{n:04}"), GroupLimits::new().concurrency(2))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_groups_page_and_the_overview_cost_the_same_on_2000_groups_as_on_60() {
    let redis = PrivateRedis::start();
    let (many, few) = (app(&redis, "many").await, app(&redis, "few").await);
    tokio::join!(groups(&many, 2_000), groups(&few, 60));
    let (many_addr, few_addr) = (serve(&many).await, serve(&few).await);
    let client = redis::Client::open(format!("redis://127.0.0.1:{}", redis.port())).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut monitor = Monitor::start(redis.port()).await;
    // Both have a full page after each of these (and one group more).
    let mut seen = Vec::new();
    for path in [
        "/admin/queues",
        "/admin/queues/cost/groups",
        "/admin/queues/cost/groups?after=g-0005",
        "/admin/queues/cost/groups?count=7&after=g-0030",
    ] {
        let on_many = cost(many_addr, &mut conn, &mut monitor, path).await;
        let on_few = cost(few_addr, &mut conn, &mut monitor, path).await;
        assert_eq!(on_many, on_few, "{path}: 2,000 groups against 60");
        let (sent, in_scripts) = on_many;
        seen.push(format!("{path}: {sent} sent, {in_scripts} in scripts"));
        assert!(sent <= 40, "{path}: {sent} commands");
        // One range read, then three reads per group of a page of 50 and one more.
        assert!(
            in_scripts <= 1 + 3 * 51,
            "{path}: {in_scripts} commands in scripts"
        );
    }
    println!(
        "commands per view, 2,000 groups and 60:\n{}",
        seen.join("\n")
    );
}

#[tokio::test]
async fn listings_cut_every_string_and_the_job_page_is_bounded() {
    let redis = PrivateRedis::start();
    let app = app(&redis, "cut").await;
    let q = app.queue::<serde_json::Value>(QUEUE).unwrap();
    let client = redis::Client::open(format!("redis://127.0.0.1:{}", redis.port())).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let huge = "n".repeat(1 << 20);
    for i in 0..10 {
        let id = format!("big-{i}");
        let blob = &huge[..400 * 1024];
        q.add(
            "x",
            serde_json::json!({ "blob": blob }),
            JobOptions::new().job_id(&id),
        )
        .await
        .unwrap();
        // A megabyte name and reason, as another producer or worker could write them.
        let _: () = redis::cmd("HSET")
            .arg(format!("cut:{QUEUE}:{id}"))
            .arg("name")
            .arg(&huge)
            .arg("failedReason")
            .arg(format!("<b>{huge}"))
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let addr = serve(&app).await;
    let listing = request(addr, "GET", "/admin/queues/cost", &[], b"")
        .await
        .unwrap();
    assert_eq!(listing.status, 200);
    assert!(
        listing.body.len() < 64 * 1024,
        "ten jobs of megabyte names: {} bytes",
        listing.body.len()
    );
    let body = String::from_utf8_lossy(&listing.body);
    assert!(
        body.contains(&format!("{}…", "n".repeat(120))),
        "cut, and says so"
    );
    assert!(body.contains("&lt;b&gt;nnn"), "escaped");
    // The job's page shows more, to a bound.
    let job = request(addr, "GET", "/admin/queues/cost/jobs/big-3", &[], b"")
        .await
        .unwrap();
    assert_eq!(job.status, 200);
    assert!(
        job.body.len() < 400 * 1024,
        "a job of two megabytes and a half: {} bytes",
        job.body.len()
    );
}
