//! Four open dashboard tabs on a busy queue: Redis commands per second for a minute with
//! no tab open, then for a minute with four (each a queue page and its live stream),
//! while a producer adds 200 jobs a second and a worker runs them. The ratio is what
//! the tabs cost; the live streams send changes, never refetch a page.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use queue_core::{app::Registrations, Job, JobError, JobOptions, Processor, QueueApp};
use queue_dashboard::{Access, Dashboard};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::BenchResult;

const QUEUE: &str = "bench-live";
/// Seconds per window (`BENCH_DASHBOARD_TAB_SECS`).
const DEFAULT_SECS: u64 = 60;
const TABS: usize = 4;
/// Jobs added per second during both windows.
const RATE: u64 = 200;

async fn noop(_: Job<serde_json::Value>) -> Result<(), JobError> {
    Ok(())
}

/// Commands Redis has processed so far.
fn commands(conn: &mut redis::Connection) -> BenchResult<u64> {
    let info: String = redis::cmd("INFO").arg("stats").query(conn)?;
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| "INFO stats has no total_commands_processed".into())
}

/// One tab: the queue page, then its live stream, read until `stop`; the updates seen.
async fn tab(addr: std::net::SocketAddr, stop: Arc<AtomicBool>) -> BenchResult<u64> {
    let mut page = tokio::net::TcpStream::connect(addr).await?;
    page.write_all(
        format!("GET /q/{QUEUE} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await?;
    let mut body = Vec::new();
    page.read_to_end(&mut body).await?;
    let mut live = tokio::net::TcpStream::connect(addr).await?;
    live.write_all(
        format!(
            "GET /q/{QUEUE}/live HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
        )
        .as_bytes(),
    )
    .await?;
    let mut updates = 0;
    let mut buf = vec![0u8; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        match tokio::time::timeout(Duration::from_millis(500), live.read(&mut buf)).await {
            Ok(Ok(0)) => break,
            Ok(Ok(n)) => {
                updates += String::from_utf8_lossy(&buf[..n])
                    .matches("event: update")
                    .count() as u64
            }
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => {}
        }
    }
    Ok(updates)
}

/// Commands per second over `secs` with `tabs` tabs open, and the updates the tabs saw.
async fn window(
    url: &str,
    addr: std::net::SocketAddr,
    tabs: usize,
    secs: u64,
) -> BenchResult<(f64, u64)> {
    let mut conn = redis::Client::open(url)?.get_connection()?;
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..tabs)
        .map(|_| tokio::spawn(tab(addr, stop.clone())))
        .collect();
    // Let the tabs open before counting.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = commands(&mut conn)?;
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let after = commands(&mut conn)?;
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let mut updates = 0;
    for reader in readers {
        updates += reader.await.map_err(|e| e.to_string())??;
    }
    Ok(((after - before - 1) as f64 / elapsed, updates))
}

pub(super) async fn measure(url: &str) -> BenchResult<String> {
    let secs = super::setting("BENCH_DASHBOARD_TAB_SECS", DEFAULT_SECS);
    let app = QueueApp::builder()
        .redis(url)
        .registrations(Registrations::None)
        .processor(Processor::new(QUEUE).concurrency(10).any_job(noop))
        .build()
        .await?;
    let workers = app.start_workers().await?;
    let dashboard = Dashboard::new(&app, |_: &axum::http::request::Parts| {
        Access::read_only("bench")
    });
    let router: Router = Router::new().merge(dashboard.mount("/q"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });

    // The producer: RATE jobs a second, through both windows.
    let producing = Arc::new(AtomicBool::new(true));
    let added = Arc::new(AtomicU64::new(0));
    let producer = {
        let (queue, producing, added) = (
            app.queue::<serde_json::Value>(QUEUE)?,
            producing.clone(),
            added.clone(),
        );
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / RATE));
            while producing.load(Ordering::Relaxed) {
                tick.tick().await;
                let n = added.fetch_add(1, Ordering::Relaxed);
                let _ = queue
                    .add("tick", serde_json::json!({ "n": n }), JobOptions::new())
                    .await;
            }
        })
    };
    let (quiet, _) = window(url, addr, 0, secs).await?;
    let (watched, updates) = window(url, addr, TABS, secs).await?;
    producing.store(false, Ordering::Relaxed);
    let _ = producer.await;
    workers.shutdown(Duration::from_secs(10)).await;
    eprintln!(
        "dashboard tabs: {} jobs added, {updates} updates seen by the tabs",
        added.load(Ordering::Relaxed)
    );
    Ok(format!(
        "### Four open tabs on a busy queue\n\n\
         {RATE} jobs added a second and run by one worker; Redis commands per second over \
         {secs} s, no tab open, then {TABS} tabs each on the queue page with its live stream.\n\n\
         | tabs | Redis commands/s | ratio | updates per tab per second |\n|---|---|---|---|\n\
         | none | {quiet:.0} | 1.00 | – |\n\
         | {TABS} | {watched:.0} | **{:.2}** | {:.1} |\n\n",
        watched / quiet.max(1.0),
        updates as f64 / TABS as f64 / secs as f64,
    ))
}
