//! A job's live stream (`GET /jobs/{queue}/{id}/events`) over real HTTP: the current
//! state at once, every change, the end; a resumed stream; the status route's access
//! decision; the cap on streams.

use std::net::SocketAddr;
use std::time::Duration;

use axum::response::IntoResponse;
use axum::Router;
use queue_axum::{JobRoutes, QueueLayer};
use queue_core::app::Registrations;
use queue_core::prelude::*;
use queue_core::QueueApp;
use queue_tests::http::get_with;
use queue_tests::{wait_until, TestRedis, SOON};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Report {
    steps: u32,
    step_ms: u64,
}

#[job_queue("js-report")]
enum Reports {
    #[job("monthly", output = u32)]
    Monthly(Report),
}

#[processor(Reports)]
async fn monthly(job: Job<Report>) -> Result<u32, JobError> {
    for step in 1..=job.data.steps {
        tokio::time::sleep(Duration::from_millis(job.data.step_ms)).await;
        job.update_progress(serde_json::json!({ "step": step }))
            .await?;
    }
    Ok(job.data.steps)
}

const ADMIN: &str = "Bearer stream-admin";

/// The application's own access check, in front of its status routes.
async fn operator_only(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let authorized = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        == Some(ADMIN);
    if authorized {
        next.run(request).await
    } else {
        axum::http::StatusCode::UNAUTHORIZED.into_response()
    }
}

async fn serve(app: &QueueApp, routes: JobRoutes) -> SocketAddr {
    let router = Router::new()
        .merge(routes.router())
        .nest(
            "/admin",
            JobRoutes::new()
                .include_return_value(true)
                .router()
                .layer(axum::middleware::from_fn(operator_only)),
        )
        .layer(QueueLayer::new(app));
    let addr = queue_tests::http::serve(router).await;
    addr
}

/// One server-sent event.
#[derive(Debug)]
struct SseEvent {
    event: String,
    id: Option<String>,
    data: serde_json::Value,
}

/// A client reading a stream as an `EventSource` does (HTTP/1.0: the body is the
/// stream, until the server closes it).
struct SseClient {
    stream: TcpStream,
    status: u16,
    buf: Vec<u8>,
}

impl SseClient {
    async fn open(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> SseClient {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let mut head =
            format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: text/event-stream\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut buf = Vec::new();
        let end = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break end;
            }
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "closed before the headers");
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        buf.drain(..end + 4);
        SseClient {
            stream,
            status,
            buf,
        }
    }

    /// The next event (keep-alive comments skipped); `None` when the stream ended.
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let block = String::from_utf8_lossy(&self.buf[..end]).to_string();
                self.buf.drain(..end + 2);
                let (mut event, mut id, mut data) = (String::from("message"), None, String::new());
                for line in block.lines() {
                    match line.split_once(':') {
                        Some(("event", v)) => event = v.trim().to_owned(),
                        Some(("id", v)) => id = Some(v.trim().to_owned()),
                        Some(("data", v)) => data.push_str(v.trim_start()),
                        _ => {}
                    }
                }
                if data.is_empty() {
                    continue;
                }
                let data = serde_json::from_str(&data).unwrap();
                return Some(SseEvent { event, id, data });
            }
            let mut chunk = [0u8; 4096];
            let read = tokio::time::timeout(SOON, self.stream.read(&mut chunk))
                .await
                .expect("an event within the deadline")
                .unwrap();
            if read == 0 {
                return None;
            }
            self.buf.extend_from_slice(&chunk[..read]);
        }
    }
}

async fn add_report(app: &QueueApp, id: &str, steps: u32, step_ms: u64) {
    app.queue_of::<Reports>()
        .unwrap()
        .add_job(Report { steps, step_ms }, JobOptions::new().job_id(id))
        .await
        .unwrap();
}

#[tokio::test]
async fn the_stream_sends_the_state_then_every_change_and_ends_with_the_job() {
    let redis = TestRedis::new("js-live");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Reports>()))
        .await;
    let addr = serve(&app, JobRoutes::new()).await;
    add_report(&app, "report-live", 3, 100).await;

    let mut stream = SseClient::open(addr, "/jobs/js-report/report-live/events", &[]).await;
    assert_eq!(stream.status, 200);
    let first = stream.next().await.unwrap();
    assert_eq!(
        (first.event.as_str(), first.id.as_deref()),
        ("state", Some("1"))
    );
    assert_eq!(first.data["state"], "waiting");

    let workers = app.start_workers().await.unwrap();
    let mut seen = Vec::new();
    while let Some(event) = stream.next().await {
        seen.push(event);
    }
    let kinds: Vec<(String, serde_json::Value, serde_json::Value)> = seen
        .iter()
        .map(|e| {
            (
                e.event.clone(),
                e.data["state"].clone(),
                e.data["progress"].clone(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (
                "state".into(),
                serde_json::json!("active"),
                serde_json::json!(0)
            ),
            (
                "progress".into(),
                serde_json::json!("active"),
                serde_json::json!({"step": 1})
            ),
            (
                "progress".into(),
                serde_json::json!("active"),
                serde_json::json!({"step": 2})
            ),
            (
                "progress".into(),
                serde_json::json!("active"),
                serde_json::json!({"step": 3})
            ),
            (
                "state".into(),
                serde_json::json!("completed"),
                serde_json::json!({"step": 3})
            ),
        ],
        "every change, in order: {seen:?}"
    );
    assert_eq!(seen.last().unwrap().id.as_deref(), Some("finished"));
    assert!(
        seen.last().unwrap().data.get("returnValue").is_none(),
        "not shown by this route"
    );
    wait_until(SOON, "the stream's watcher to leave", || async {
        (app.watch_stats().watchers == 0).then_some(())
    })
    .await;
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn a_resumed_stream_starts_with_the_current_state() {
    let redis = TestRedis::new("js-resume");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Reports>()))
        .await;
    let addr = serve(&app, JobRoutes::new()).await;
    add_report(&app, "report-resume", 2, 10).await;
    let path = "/jobs/js-report/report-resume/events";

    let mut stream = SseClient::open(addr, path, &[]).await;
    let first = stream.next().await.unwrap();
    assert_eq!(first.data["state"], "waiting");
    drop(stream);

    // Away while the job runs to the end.
    let workers = app.start_workers().await.unwrap();
    let reports = app.queue_of::<Reports>().unwrap();
    queue_tests::wait_for_state(&reports, "report-resume", JobState::Completed, SOON).await;

    let mut resumed = SseClient::open(addr, path, &[("last-event-id", "1")]).await;
    assert_eq!(resumed.status, 200);
    let now = resumed.next().await.unwrap();
    assert_eq!(
        (now.event.as_str(), now.id.as_deref()),
        ("state", Some("finished"))
    );
    assert_eq!(now.data["state"], "completed");
    assert_eq!(
        now.data["progress"],
        serde_json::json!({"step": 2}),
        "the changes made meanwhile"
    );
    assert!(
        resumed.next().await.is_none(),
        "the stream ends with the job"
    );

    // A client that saw the end is told to stop reconnecting.
    let done = get_with(addr, path, &[("last-event-id", "finished")]).await;
    assert_eq!(done.status, 204);
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn the_stream_is_refused_where_the_status_route_is() {
    let redis = TestRedis::new("js-access");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Reports>()))
        .await;
    let addr = serve(&app, JobRoutes::new().queues(["another"])).await;
    add_report(&app, "report-access", 1, 0).await;

    let refused = get_with(addr, "/admin/jobs/js-report/report-access/events", &[]).await;
    assert_eq!(refused.status, 401, "the app's access check answers");
    let mut allowed = SseClient::open(
        addr,
        "/admin/jobs/js-report/report-access/events",
        &[("authorization", ADMIN)],
    )
    .await;
    assert_eq!(allowed.status, 200);
    assert_eq!(allowed.next().await.unwrap().data["state"], "waiting");

    // A queue the public routes do not serve, and a job that does not exist.
    let unserved = get_with(addr, "/jobs/js-report/report-access/events", &[]).await;
    assert_eq!(unserved.status, 404);
    let missing = get_with(
        addr,
        "/admin/jobs/js-report/no-such-report/events",
        &[("authorization", ADMIN)],
    )
    .await;
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn live_streams_are_capped() {
    let redis = TestRedis::new("js-cap");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Reports>()))
        .await;
    let addr = serve(&app, JobRoutes::new().max_live_streams(1)).await;
    add_report(&app, "report-cap", 1, 0).await;
    let path = "/jobs/js-report/report-cap/events";

    let mut first = SseClient::open(addr, path, &[]).await;
    assert_eq!(first.next().await.unwrap().data["state"], "waiting");
    let second = get_with(addr, path, &[]).await;
    assert_eq!(second.status, 503);
    assert_eq!(second.header("retry-after"), Some("30"));
    drop(first);
    wait_until(SOON, "the slot to come back", || async {
        let mut again = SseClient::open(addr, path, &[]).await;
        (again.status == 200 && again.next().await.is_some()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn one_client_cannot_hold_every_stream() {
    let redis = TestRedis::new("js-share");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Reports>()))
        .await;
    let routes = JobRoutes::new()
        .max_live_streams(8)
        .max_live_streams_per_job(2)
        .max_live_streams_per_client(3);
    let addr = serve(&app, routes).await;
    for id in ["share-a", "share-b", "share-c"] {
        add_report(&app, id, 1, 0).await;
    }
    let open = |id: &'static str| async move {
        SseClient::open(addr, &format!("/jobs/js-report/{id}/events"), &[]).await
    };

    // Two streams on one job, then that job is full: 429, the client's own doing.
    let _a1 = open("share-a").await;
    let _a2 = open("share-a").await;
    let third = get_with(addr, "/jobs/js-report/share-a/events", &[]).await;
    assert_eq!(
        third.status,
        429,
        "{}",
        String::from_utf8_lossy(&third.body)
    );
    assert!(third.header("retry-after").is_some());

    // The client (this loopback address) holds three in all, whatever the jobs.
    let b = open("share-b").await;
    assert_eq!(b.status, 200);
    let fourth = get_with(addr, "/jobs/js-report/share-c/events", &[]).await;
    assert_eq!(fourth.status, 429);
    assert!(String::from_utf8_lossy(&fourth.body).contains("this client"));

    // A stream it closes is its to open again.
    drop(b);
    wait_until(SOON, "the client's slot to come back", || async {
        let mut again = open("share-c").await;
        (again.status == 200 && again.next().await.is_some()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_stream_with_nothing_to_tell_ends_at_its_idle_limit() {
    let redis = TestRedis::new("js-idle");
    let app = redis
        .app(|b| b.registrations(Registrations::of::<Reports>()))
        .await;
    let addr = serve(
        &app,
        JobRoutes::new().live_stream_idle(Duration::from_millis(500)),
    )
    .await;
    // No worker runs: the job waits, and nothing happens to it.
    add_report(&app, "idle-1", 1, 0).await;
    let mut stream = SseClient::open(addr, "/jobs/js-report/idle-1/events", &[]).await;
    assert_eq!(stream.next().await.unwrap().data["state"], "waiting");
    let started = std::time::Instant::now();
    assert!(stream.next().await.is_none(), "the stream ends");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// A batch handler's jobs (#46): each reports its own progress and logs, and gets its
/// own result.
async fn steps_in_batch(batch: Batch<u32>) -> Result<BatchResult, JobError> {
    let mut result = BatchResult::new();
    for job in &batch {
        job.update_progress(serde_json::json!({ "of": job.data }))
            .await?;
        job.log(format!("step {}", job.data)).await?;
        result.complete(job, job.data * 2);
    }
    Ok(result)
}

#[tokio::test]
async fn a_batched_jobs_stream_shows_its_own_progress_and_result() {
    let redis = TestRedis::new("js-batch");
    let app = redis
        .app(|b| {
            b.processor(Processor::new("js-batch").batch(
                10,
                Duration::from_millis(300),
                steps_in_batch,
            ))
        })
        .await;
    let addr = serve(&app, JobRoutes::new()).await;
    let q = app.queue::<u32>("js-batch").unwrap();
    for n in 1..=3 {
        q.add("step", n, JobOptions::new().job_id(format!("step-{n}")))
            .await
            .unwrap();
    }
    let mut stream = SseClient::open(
        addr,
        "/admin/jobs/js-batch/step-2/events",
        &[("authorization", ADMIN)],
    )
    .await;
    assert_eq!(stream.status, 200);
    let workers = app.start_workers().await.unwrap();
    let mut seen = Vec::new();
    while let Some(event) = stream.next().await {
        seen.push(event);
    }
    workers.shutdown(SOON).await;
    let last = seen.last().unwrap();
    assert_eq!(last.data["state"], "completed", "{seen:?}");
    assert_eq!(
        last.data["returnValue"],
        serde_json::json!(4),
        "its own: {seen:?}"
    );
    assert_eq!(
        last.data["progress"],
        serde_json::json!({ "of": 2 }),
        "{seen:?}"
    );
    let logs = q.get_job_logs("step-2", 0..10).await.unwrap();
    assert_eq!(logs.lines, ["step 2"], "its own log lines");
}
