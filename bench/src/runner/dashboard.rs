//! The dashboard with a deep history: 1,000,000 completed jobs in one queue (as BullMQ
//! stores them: a hash each and the `completed` sorted set), then the overview, the
//! first page of 50 completed jobs and a deep page, each timed inside the server (from
//! the request's arrival to its response, without the client or the loopback).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use queue_axum::dashboard::{Access, Dashboard};
use queue_core::{QueueApp, Registrations};
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
        for id in next..(next + 10_000).min(n) {
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
        next += 10_000;
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

async fn measure_pages(url: &str, jobs: u64) -> BenchResult<Vec<(&'static str, Vec<u64>)>> {
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
    let dashboard = Dashboard::new(&app, |_: &axum::http::request::Parts| {
        Access::read_only("bench")
    });
    let router = Router::new()
        .nest("/q", dashboard.router())
        .layer(axum::middleware::from_fn(timed));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    let pages = [
        ("overview", "/q".to_owned()),
        (
            "50 newest completed",
            format!("/q/queues/{QUEUE}?state=completed"),
        ),
        (
            "50 completed at page 10,000",
            format!("/q/queues/{QUEUE}?state=completed&page=10000"),
        ),
        ("one job", format!("/q/queues/{QUEUE}/jobs/123456")),
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
        for _ in 0..REQUESTS {
            get(addr, &path).await?;
        }
        let mut taken = std::mem::take(
            &mut *timings
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        taken.sort_unstable();
        out.push((label, taken));
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
         Server-side time per page ({REQUESTS} requests each, after one warm-up), target <= 50 ms.\n\n\
         | page | p50 | p99 | max |\n|---|---|---|---|\n"
    );
    for (label, us) in &pages {
        report.push_str(&format!(
            "| {label} | {:.2} ms | {:.2} ms | {:.2} ms |\n",
            ms(percentile(us, 50.0)),
            ms(percentile(us, 99.0)),
            ms(percentile(us, 100.0)),
        ));
    }
    report.push('\n');
    redis.flush()?;
    Ok(report)
}
