//! The dashboard with a deep history: 1,000,000 completed jobs in one queue (as BullMQ
//! stores them: a hash each and the `completed` sorted set), then the overview, the
//! first page of 50 completed jobs, a deep page, a job and three searches, each timed
//! inside the server (from the request's arrival to its response, without the client or
//! the loopback), with the Redis CPU and commands each view cost. Then four open tabs
//! for a minute, against none (`dashboard_tabs`).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use queue_core::{app::Registrations, QueueApp};
use queue_dashboard::{Access, Dashboard};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::redis::BenchRedis;
use super::stats::percentile;
use crate::BenchResult;

const QUEUE: &str = "bench-dashboard";
/// Completed jobs in the queue (`BENCH_DASHBOARD_JOBS`).
const DEFAULT_JOBS: u64 = 1_000_000;
/// Requests per page.
const REQUESTS: usize = 50;

/// Writes `n` completed jobs straight into Redis, pipelined.
async fn fill(url: &str, n: u64) -> BenchResult<()> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let base = format!("bull:{QUEUE}");
    let now = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis(),
    )?;
    let mut next = 0;
    while next < n {
        let mut pipe = redis::pipe();
        for id in next..(next + 1_000).min(n) {
            let finished = now - (n - id);
            pipe.cmd("HSET")
                .arg(format!("{base}:{id}"))
                .arg(&[
                    ("name", "email".to_owned()),
                    ("data", format!(r#"{{"to":"user{id}@example.com"}}"#)),
                    ("opts", r#"{"attempts":1}"#.to_owned()),
                    ("timestamp", (finished - 20).to_string()),
                    ("processedOn", (finished - 10).to_string()),
                    ("finishedOn", finished.to_string()),
                    ("returnvalue", "\"sent\"".to_owned()),
                    ("atm", "1".to_owned()),
                ])
                .ignore();
            pipe.cmd("ZADD")
                .arg(format!("{base}:completed"))
                .arg(finished)
                .arg(id)
                .ignore();
        }
        let () = pipe.query_async(&mut conn).await?;
        next += 1_000;
    }
    Ok(())
}

/// One GET over a fresh connection; returns the whole answer.
async fn get(addr: std::net::SocketAddr, path: &str) -> BenchResult<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    let mut body = Vec::new();
    stream.read_to_end(&mut body).await?;
    if !body.starts_with(b"HTTP/1.1 200") {
        return Err(format!(
            "GET {path}: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// What one page cost: server times (µs, sorted), Redis CPU (µs) and commands per view.
struct PageCost {
    label: &'static str,
    server_us: Vec<u64>,
    redis_cpu_us: f64,
    commands: f64,
}

/// Redis's CPU seconds and commands processed so far (its `INFO`; one command).
fn redis_counters(conn: &mut redis::Connection) -> BenchResult<(f64, u64)> {
    let info: String = redis::cmd("INFO").query(conn)?;
    let read = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok((
        read("used_cpu_user:") + read("used_cpu_sys:"),
        read("total_commands_processed:") as u64,
    ))
}

async fn measure_pages(url: &str, jobs: u64) -> BenchResult<Vec<PageCost>> {
    let mut counters = redis::Client::open(url)?.get_connection()?;
    let app = QueueApp::builder()
        .redis(url)
        .registrations(Registrations::None)
        .build()
        .await?;
    let _ = app.queue::<serde_json::Value>(QUEUE)?;
    let timings: Arc<Mutex<Vec<u64>>> = Arc::default();
    let recorded = timings.clone();
    let timed = move |request: Request, next: Next| {
        let recorded = recorded.clone();
        async move {
            let started = Instant::now();
            let response: Response = next.run(request).await;
            let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            recorded
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(us);
            response
        }
    };
    // Payload search is the application's choice, and for those shown payloads; the
    // bench times every search, so its per-person bound is lifted.
    let dashboard = Dashboard::new(&app, |_: &axum::http::request::Parts| {
        Access::read_only("bench").with_payloads()
    })
    .payload_search(true)
    .max_searches_per_minute(u32::MAX);
    let router = Router::new()
        .merge(dashboard.mount("/q"))
        .layer(axum::middleware::from_fn(timed));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    let last = jobs.saturating_sub(1);
    let pages = [
        ("overview", "/q".to_owned()),
        ("50 newest completed", format!("/q/{QUEUE}?state=completed")),
        (
            "50 completed at page 10,000",
            format!("/q/{QUEUE}?state=completed&page=10000"),
        ),
        ("one job", format!("/q/{QUEUE}/jobs/{}", jobs / 2)),
        (
            "search by name (50 matches)",
            format!("/q/{QUEUE}?state=completed&q=name%20%3D%20email"),
        ),
        (
            "search by id prefix (20,000 ids)",
            format!("/q/{QUEUE}?state=completed&q=x{last}"),
        ),
        (
            "search by payload field (5,000 payloads)",
            format!("/q/{QUEUE}?state=completed&q=data.to%20%3D%20nobody%40example.com"),
        ),
    ];
    let mut out = Vec::new();
    for (label, path) in pages {
        // One warm-up request (the queue's engine handle opens on first use), which
        // also shows the page is the real one.
        let page = get(addr, &path).await?;
        if label == "overview" && !page.contains(&format!("<td class=\"n\">{jobs}</td>")) {
            return Err(format!("the overview does not show {jobs} completed jobs").into());
        }
        timings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
        let (cpu_before, commands_before) = redis_counters(&mut counters)?;
        for _ in 0..REQUESTS {
            get(addr, &path).await?;
        }
        let (cpu_after, commands_after) = redis_counters(&mut counters)?;
        let mut taken = std::mem::take(
            &mut *timings
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        taken.sort_unstable();
        out.push(PageCost {
            label,
            server_us: taken,
            redis_cpu_us: (cpu_after - cpu_before) * 1e6 / REQUESTS as f64,
            // The second INFO is one of them.
            commands: (commands_after - commands_before - 1) as f64 / REQUESTS as f64,
        });
    }
    Ok(out)
}

pub(super) fn measure(redis: &mut BenchRedis) -> BenchResult<String> {
    let jobs = super::setting("BENCH_DASHBOARD_JOBS", DEFAULT_JOBS);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    redis.flush()?;
    let filling = Instant::now();
    runtime.block_on(fill(&redis.url(), jobs))?;
    eprintln!(
        "dashboard: {jobs} completed jobs written in {:?}",
        filling.elapsed()
    );
    let pages = runtime.block_on(measure_pages(&redis.url(), jobs))?;
    let ms = |us: u64| us as f64 / 1000.0;
    let mut report = format!(
        "### Dashboard with {jobs} completed jobs in one queue\n\n\
         Server-side time per page ({REQUESTS} requests each, after one warm-up), target <= 50 ms; \
         Redis CPU and commands (those scripts run included) per view.\n\n\
         | page | p50 | p99 | max | Redis CPU per view | Redis commands per view |\n\
         |---|---|---|---|---|---|\n"
    );
    for page in &pages {
        let us = &page.server_us;
        report.push_str(&format!(
            "| {} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.0} |\n",
            page.label,
            ms(percentile(us, 50.0)),
            ms(percentile(us, 99.0)),
            ms(percentile(us, 100.0)),
            page.redis_cpu_us / 1000.0,
            page.commands,
        ));
    }
    report.push('\n');
    redis.flush()?;
    report.push_str(&runtime.block_on(super::dashboard_tabs::measure(&redis.url()))?);
    redis.flush()?;
    Ok(report)
}
