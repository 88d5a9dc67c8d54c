//! A slow link (#48): Redis behind the fault proxy (`tools/fault-proxy`) with about 1 ms
//! and 5 ms of added round trip, and each system's enqueue rate and worker throughput
//! through it, in the same rounds. Where only ours slows down, ours pays a round trip the
//! others do not.
//!
//! The proxy runs in this process, on a runtime thread of its own, for every system
//! alike; the jobs a worker processes are added straight to Redis beforehand. The round
//! trip it adds is measured (a `PING` through it against one straight to Redis, median
//! of 200) and shown beside the delay set. A worker's rows are timed from the worker's
//! creation to its last job (`coldMs`): from its first handler start, Node's figure
//! left out the round trips its loop spends filling every slot first, and ours counted
//! them.

use std::time::{Duration, Instant};

use fault_proxy::FaultProxy;

use super::redis::BenchRedis;
use super::stats::median;
use super::suites::{field, ratio};
use super::systems::System;
use super::{rotated, Settings};
use crate::BenchResult;

/// The delay set each way, for about 1 ms and 5 ms of added round trip.
const ONE_WAY: [Duration; 2] = [Duration::from_micros(500), Duration::from_micros(2_500)];

/// A row: what runs, and how many jobs at each delay (fewer where a round trip paces
/// each job).
struct Row {
    label: &'static str,
    args: fn(&str) -> Vec<String>,
    /// Jobs at about 1 ms and at about 5 ms.
    jobs: [u64; 2],
    /// The worker rows pre-fill their queue.
    queue: Option<&'static str>,
}

const ROWS: [Row; 5] = [
    Row {
        label: "`add`, one at a time",
        args: |n| args(&["enqueue", "bench-slow-add", "single", n]),
        jobs: [1_000, 300],
        queue: None,
    },
    Row {
        label: "`add`, 100 in flight",
        args: |n| args(&["enqueue", "bench-slow-add", "inflight", n]),
        jobs: [10_000, 5_000],
        queue: None,
    },
    Row {
        label: "processing, concurrency 1",
        args: |n| args(&["work", "bench-c1", "1", n]),
        jobs: [500, 150],
        queue: Some("bench-c1"),
    },
    Row {
        label: "processing, concurrency 10",
        args: |n| args(&["work", "bench-c10", "10", n]),
        jobs: [4_000, 1_500],
        queue: Some("bench-c10"),
    },
    Row {
        label: "processing, concurrency 100",
        args: |n| args(&["work", "bench-c100", "100", n]),
        jobs: [10_000, 5_000],
        queue: Some("bench-c100"),
    },
];

fn args(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| (*p).to_owned()).collect()
}

/// The median round trip of a `PING` to `url`, of 200.
fn ping_rtt(url: &str) -> BenchResult<Duration> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_connection()?;
    let mut samples = Vec::with_capacity(200);
    for _ in 0..200 {
        let started = Instant::now();
        let _: String = redis::cmd("PING").query(&mut conn)?;
        samples.push(started.elapsed().as_secs_f64());
    }
    Ok(Duration::from_secs_f64(median(&samples)))
}

pub(super) fn measure(redis: &mut BenchRedis, settings: Settings) -> BenchResult<String> {
    // The proxy's tasks run on this runtime's threads while this one runs the systems;
    // several, since the proxy sleeps the last part of each delay on its thread.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()?;
    let proxy = runtime.block_on(FaultProxy::start(&format!("127.0.0.1:{}", redis.port())));
    let direct = ping_rtt(&redis.url())?;
    let mut out = String::from(
        "### A slow link (#48): each system through the fault proxy (jobs/s, median of the rounds)\n\n",
    );
    for (delay, one_way) in ONE_WAY.into_iter().enumerate() {
        proxy.latency(one_way, Duration::ZERO);
        let added = ping_rtt(&proxy.url())?.saturating_sub(direct);
        out.push_str(&format!(
            "Added round trip: {:.2} ms measured ({} µs set each way).\n\n\
             | what | jobs | ours | raw engine | Node BullMQ 6 | ours/raw | ours/Node |\n\
             |---|---|---|---|---|---|---|\n",
            added.as_secs_f64() * 1000.0,
            one_way.as_micros(),
        ));
        for row in &ROWS {
            let n = row.jobs[delay];
            let n_arg = n.to_string();
            let mut rates: [Vec<f64>; 3] = Default::default();
            for round in 0..settings.rounds {
                for (index, system) in rotated(&[0, 1, 2], round)
                    .into_iter()
                    .map(|i| (i, System::ALL[i]))
                {
                    redis.flush()?;
                    if let Some(queue) = row.queue {
                        System::Raw.run(&redis.url(), &["enqueue", queue, "bulk", &n_arg])?;
                    }
                    let args = (row.args)(&n_arg);
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    let result = system.run(&proxy.url(), &args)?;
                    // A worker's row is timed from its creation: see `Timed::cold`.
                    let timed = if row.queue.is_some() { "coldMs" } else { "ms" };
                    rates[index].push(n as f64 / field(&result, timed)? * 1000.0);
                }
            }
            let [ours, raw, node] = rates.map(|r| median(&r));
            eprintln!(
                "slowlink {one_way:?} {}: {ours:.0} {raw:.0} {node:.0}",
                row.label
            );
            out.push_str(&format!(
                "| {} | {n} | {ours:.0} | {raw:.0} | {node:.0} | {} | {} |\n",
                row.label,
                ratio(ours, raw),
                ratio(ours, node),
            ));
        }
        out.push('\n');
    }
    proxy.clear();
    drop(proxy);
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(out)
}
