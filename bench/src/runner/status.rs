//! The status route's cost to Redis with a deep backlog: what one `GET /jobs/{queue}/{id}`
//! lookup (the job and its state) costs in Redis time with 500,000 waiting jobs, ours
//! against the engine's own `get_job` + `get_job_state` on the same data.

use std::time::Duration;

use bullmq::options::RedisConnectionOptions;
use queue_core::{app::Registrations, queue::BulkJob, JobOptions, QueueApp};

use super::redis::BenchRedis;
use crate::BenchResult;

const QUEUE: &str = "bench-status";
/// Jobs waiting while the lookups run (`BENCH_STATUS_BACKLOG`).
const DEFAULT_BACKLOG: u64 = 500_000;
/// Lookups per system; the oldest jobs, at the far end of the wait list.
const LOOKUPS: u64 = 200;

/// Redis's own count of microseconds spent in commands since the last reset.
fn redis_usec(redis: &mut BenchRedis) -> BenchResult<f64> {
    let info = redis.info("commandstats")?;
    Ok(info
        .lines()
        .filter(|l| l.starts_with("cmdstat_"))
        .filter_map(|l| {
            l.split(',')
                .find_map(|part| part.split_once("usec=").map(|(_, v)| v.to_owned()))
        })
        .filter_map(|v| v.parse::<f64>().ok())
        .sum())
}

async fn fill(url: &str, backlog: u64) -> BenchResult<()> {
    let app = QueueApp::builder()
        .redis(url)
        .registrations(Registrations::None)
        .command_timeout(Duration::from_secs(60))
        .build()
        .await?;
    let queue = app.queue::<u64>(QUEUE)?;
    let all: Vec<u64> = (0..backlog).collect();
    for chunk in all.chunks(1000) {
        let jobs = chunk
            .iter()
            .map(|n| {
                BulkJob::new("job", *n)
                    .options(JobOptions::new().remove_on_complete(queue_core::Retention::All))
            })
            .collect();
        queue.add_bulk(jobs).await?;
    }
    Ok(())
}

async fn ours(url: &str) -> BenchResult<()> {
    let app = QueueApp::builder()
        .redis(url)
        .registrations(Registrations::None)
        .build()
        .await?;
    let queue = app.queue::<u64>(QUEUE)?;
    for id in 1..=LOOKUPS {
        let id = id.to_string();
        queue
            .get_job(&id)
            .await?
            .ok_or("a job of the backlog is missing")?;
        queue.get_job_state(&id).await?.ok_or("no state")?;
    }
    Ok(())
}

async fn engine(url: &str) -> BenchResult<()> {
    let options = bullmq::QueueOptions::new().connection(RedisConnectionOptions::new().url(url));
    let queue = bullmq::Queue::with_options(QUEUE, options).await?;
    for id in 1..=LOOKUPS {
        let id = id.to_string();
        queue
            .get_job(&id)
            .await?
            .ok_or("a job of the backlog is missing")?;
        queue.get_job_state(&id).await?;
    }
    Ok(())
}

pub(super) fn measure(redis: &mut BenchRedis) -> BenchResult<String> {
    let backlog = super::setting("BENCH_STATUS_BACKLOG", DEFAULT_BACKLOG);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    redis.flush()?;
    runtime.block_on(fill(&redis.url(), backlog))?;
    let mut per_lookup = Vec::new();
    for system in ["ours", "engine"] {
        redis.reset_stats()?;
        let before = redis_usec(redis)?;
        match system {
            "ours" => runtime.block_on(ours(&redis.url()))?,
            _ => runtime.block_on(engine(&redis.url()))?,
        }
        let spent = redis_usec(redis)? - before;
        per_lookup.push(spent / LOOKUPS as f64);
        eprintln!("status {system}: {spent} µs of Redis time for {LOOKUPS} lookups");
    }
    Ok(format!(
        "### Status lookup with a deep backlog\n\n\
         Redis time (`INFO commandstats`) per status lookup (the job and its state, as \
         `GET /jobs/{{queue}}/{{id}}` does) of the {LOOKUPS} oldest of {backlog} waiting jobs.\n\n\
         | lookup | Redis µs per lookup | ours/engine |\n|---|---|---|\n\
         | ours (ZSCORE, EXISTS) | {:.1} | {:.1e} |\n| engine `get_job_state` (getState script) | {:.1} | 1 |\n\n",
        per_lookup[0],
        per_lookup[0] / per_lookup[1],
        per_lookup[1],
    ))
}
