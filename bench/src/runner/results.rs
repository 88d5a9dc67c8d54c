//! Results to the client: for a 10 ms job, the time from the client's POST to the
//! client knowing the result, `Prefer: wait` against polling the status route every
//! 100 ms (what clients do without it), with the HTTP requests each finished job took;
//! and what a waiter costs: memory per waiter and Redis connections with 5,000 waiting.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::Router;
use queue_axum::{Accepted, JobRoutes, PreferWaitLayer, QueueError, QueueLayer};
use queue_core::{app::Registrations, Job, JobError, JobOptions, Processor, QueueApp};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::redis::BenchRedis;
use super::stats::percentile;
use crate::BenchResult;

const QUEUE: &str = "bench-results";
/// A queue nobody works: its jobs are waited on for the memory figure.
const IDLE_QUEUE: &str = "bench-results-idle";
/// Jobs per mode (`BENCH_RESULTS_JOBS`).
const DEFAULT_JOBS: u64 = 200;
/// Clients at once, each alternating the modes.
const CLIENTS: u64 = 4;
const POLL_EVERY: Duration = Duration::from_millis(100);
const WAITERS: usize = 5_000;

async fn ten_ms(_job: Job<u64>) -> Result<u64, JobError> {
    tokio::time::sleep(Duration::from_millis(10)).await;
    Ok(1)
}

async fn enqueue(app: axum::Extension<QueueApp>) -> Result<Accepted, QueueError> {
    let queue = app.queue::<u64>(QUEUE)?;
    Ok(queue.add("ten-ms", 1, JobOptions::new()).await?.into())
}

/// One request over a fresh connection: the status and the whole answer.
async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    prefer: Option<&str>,
) -> BenchResult<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let prefer = prefer.map_or(String::new(), |p| format!("Prefer: {p}\r\n"));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n{prefer}\r\n"
    );
    stream.write_all(head.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or("no status")?;
    Ok((status, text))
}

fn header<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    answer.lines().take_while(|l| !l.is_empty()).find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn finished(answer: &str) -> bool {
    answer.contains(r#""state":"completed""#) || answer.contains(r#""state":"failed""#)
}

/// One job the `Prefer: wait` way: microseconds to the result, and requests made.
async fn with_prefer(addr: SocketAddr) -> BenchResult<(u64, u64)> {
    let started = Instant::now();
    let (status, answer) = request(addr, "POST", "/work", Some("wait=10")).await?;
    if status != 200 || !finished(&answer) {
        return Err(format!("Prefer: wait answered {status}: {answer}").into());
    }
    Ok((u64::try_from(started.elapsed().as_micros())?, 1))
}

/// One job the polling way: a 202, then the status every 100 ms until finished.
async fn with_polling(addr: SocketAddr) -> BenchResult<(u64, u64)> {
    let started = Instant::now();
    let (status, answer) = request(addr, "POST", "/work", None).await?;
    let location = header(&answer, "location").ok_or("no Location")?.to_owned();
    if status != 202 {
        return Err(format!("POST answered {status}").into());
    }
    let mut requests = 1;
    loop {
        tokio::time::sleep(POLL_EVERY).await;
        let (_, answer) = request(addr, "GET", &location, None).await?;
        requests += 1;
        if finished(&answer) {
            return Ok((u64::try_from(started.elapsed().as_micros())?, requests));
        }
    }
}

/// The resident memory of this process, KiB.
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

struct Figures {
    prefer: Vec<u64>,
    prefer_requests: Vec<u64>,
    polling: Vec<u64>,
    polling_requests: Vec<u64>,
    bytes_per_waiter: f64,
    connections: (usize, usize),
}

async fn run(
    url: &str,
    jobs: u64,
    redis_clients: impl Fn() -> BenchResult<usize>,
) -> BenchResult<Figures> {
    let app = QueueApp::builder()
        .redis(url)
        .registrations(Registrations::None)
        .processor(Processor::new(QUEUE).concurrency(50).job("ten-ms", ten_ms))
        .build()
        .await?;
    let workers = app.start_workers().await?;
    let status = JobRoutes::new();
    let router = Router::new()
        .route("/work", post(enqueue))
        .layer(PreferWaitLayer::new(Duration::from_secs(10)).status(status.clone()))
        .merge(status.router())
        .layer(axum::Extension(app.clone()))
        .layer(QueueLayer::new(&app));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });

    // Warm-up: the queue's handles and its event reader open.
    with_prefer(addr).await?;
    let per_client = jobs.div_ceil(CLIENTS);
    let mut clients = tokio::task::JoinSet::new();
    for client in 0..CLIENTS {
        clients.spawn(async move {
            let mut out = Vec::new();
            for n in 0..per_client * 2 {
                // Alternating, so that drift on a shared machine hits both modes.
                let prefer = (n + client) % 2 == 0;
                let measured = if prefer {
                    with_prefer(addr).await?
                } else {
                    with_polling(addr).await?
                };
                out.push((prefer, measured));
            }
            BenchResult::Ok(out)
        });
    }
    let mut figures = Figures {
        prefer: Vec::new(),
        prefer_requests: Vec::new(),
        polling: Vec::new(),
        polling_requests: Vec::new(),
        bytes_per_waiter: 0.0,
        connections: (0, 0),
    };
    while let Some(done) = clients.join_next().await {
        for (prefer, (us, requests)) in done?? {
            if prefer {
                figures.prefer.push(us);
                figures.prefer_requests.push(requests);
            } else {
                figures.polling.push(us);
                figures.polling_requests.push(requests);
            }
        }
    }
    workers.shutdown(Duration::from_secs(10)).await;

    // Waiters: jobs nobody runs, each waited on.
    let idle = app.queue::<u64>(IDLE_QUEUE)?;
    let bulk = (0..WAITERS as u64)
        .map(|n| queue_core::queue::BulkJob::new("idle", n))
        .collect();
    let added = idle.add_bulk(bulk).await?;
    let clients_before = redis_clients()?;
    // One waiter first: the reader's own cost is not a waiter's.
    let first = added[0].clone();
    let opener = tokio::spawn(async move { first.wait(Duration::from_secs(600)).await });
    while app.watch_stats().watchers < 1 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before = rss_kb();
    let mut waits = Vec::with_capacity(WAITERS);
    for job in added.into_iter().skip(1) {
        waits.push(tokio::spawn(async move {
            job.wait(Duration::from_secs(600)).await
        }));
    }
    while app.watch_stats().watchers < WAITERS {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let after = rss_kb();
    figures.connections = (clients_before, redis_clients()?);
    figures.bytes_per_waiter = (after.saturating_sub(before) * 1024) as f64 / (WAITERS - 1) as f64;
    opener.abort();
    for wait in waits {
        wait.abort();
    }
    Ok(figures)
}

pub(super) fn measure(redis: &mut BenchRedis) -> BenchResult<String> {
    let jobs = super::setting("BENCH_RESULTS_JOBS", DEFAULT_JOBS);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    redis.flush()?;
    let url = redis.url();
    let clients_url = url.clone();
    let redis_clients = move || -> BenchResult<usize> {
        let mut conn = redis::Client::open(clients_url.as_str())?.get_connection()?;
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut conn)?;
        Ok(list.lines().filter(|l| !l.trim().is_empty()).count() - 1)
    };
    let figures = runtime.block_on(run(&url, jobs, redis_clients))?;
    redis.flush()?;
    let ms = |us: u64| us as f64 / 1000.0;
    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
    let (p50, p99) = (
        |v: &[u64]| ms(percentile(v, 50.0)),
        |v: &[u64]| ms(percentile(v, 99.0)),
    );
    eprintln!(
        "results: prefer {} jobs, polling {} jobs",
        figures.prefer.len(),
        figures.polling.len()
    );
    Ok(format!(
        "### Results to the client: `Prefer: wait` against polling\n\n\
         A 10 ms job, {CLIENTS} clients at once alternating the two ways, {} jobs each way: \
         the time from the client's POST to the client holding the result, and the HTTP \
         requests it took. Polling: a 202, then `GET` on its `Location` every 100 ms.\n\n\
         | way | p50 | p99 | requests per job | p99 / polling's |\n|---|---|---|---|---|\n\
         | `Prefer: wait=10` | {:.1} ms | {:.1} ms | {:.2} | {:.2} |\n\
         | polling every 100 ms | {:.1} ms | {:.1} ms | {:.2} | 1 |\n\n\
         {WAITERS} waits on one queue: {:.0} bytes of memory per waiter (process RSS), \
         {} Redis connections before the waits and {} during (`CLIENT LIST`).\n\n",
        figures.prefer.len(),
        p50(&figures.prefer),
        p99(&figures.prefer),
        mean(&figures.prefer_requests),
        p99(&figures.prefer) / p99(&figures.polling),
        p50(&figures.polling),
        p99(&figures.polling),
        mean(&figures.polling_requests),
        figures.bytes_per_waiter,
        figures.connections.0,
        figures.connections.1,
    ))
}
