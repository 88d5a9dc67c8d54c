//! Fair groups' cost: processing throughput at concurrency 10 and 100 with 1, 10, 100
//! and 10,000 groups against ungrouped jobs, in alternating rounds, with the Redis
//! commands and the script time each job cost (`INFO commandstats`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queue_core::{
    app::Registrations, group::GroupLimits, queue::BulkJob, Dep, Job, JobError, JobOptions,
    Processor, QueueApp, Retention,
};

use super::redis::BenchRedis;
use super::stats::median;
use super::{rotated, Settings};
use crate::BenchResult;

const QUEUE: &str = "bench-groups";
/// `None`: ungrouped jobs and worker; `Some(n)`: jobs spread over `n` groups.
const SHAPES: [Option<u64>; 5] = [None, Some(1), Some(10), Some(100), Some(10_000)];
const CONCURRENCY: [usize; 2] = [10, 100];

async fn count(_: Job<u64>, done: Dep<AtomicU64>) -> Result<(), JobError> {
    done.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// One run's figures.
#[derive(Debug, Clone, Copy)]
struct Run {
    jobs_per_sec: f64,
    commands_per_job: f64,
    script_us_per_job: f64,
}

/// Every command's calls, and the microseconds spent in scripts, since the last reset.
fn stats(redis: &mut BenchRedis) -> BenchResult<(u64, u64)> {
    let info = redis.info("commandstats")?;
    let (mut calls, mut script_us) = (0, 0);
    for line in info.lines() {
        let Some((name, fields)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let read = |key: &str| {
            fields
                .split(',')
                .find_map(|p| p.strip_prefix(key))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        // The bench's own INFO and CONFIG calls are not the workers'.
        if matches!(name, "info" | "config") {
            continue;
        }
        calls += read("calls=");
        if matches!(name, "evalsha" | "eval") {
            script_us += read("usec=");
        }
    }
    Ok((calls, script_us))
}

fn run_once(
    redis: &mut BenchRedis,
    runtime: &tokio::runtime::Runtime,
    jobs: u64,
    groups: Option<u64>,
    concurrency: usize,
) -> BenchResult<Run> {
    redis.flush()?;
    let url = redis.url();
    let done = Arc::new(AtomicU64::new(0));
    let (app, queue) = runtime.block_on(async {
        let mut processor = Processor::new(QUEUE)
            .concurrency(concurrency)
            .any_job(count);
        if groups.is_some() {
            processor = processor.groups(GroupLimits::new());
        }
        let app = QueueApp::builder()
            .redis(url)
            .registrations(Registrations::None)
            .command_timeout(Duration::from_secs(60))
            .provide_arc(done.clone())
            .processor(processor)
            .build()
            .await?;
        let queue = app.queue::<u64>(QUEUE)?;
        let all: Vec<u64> = (0..jobs).collect();
        for chunk in all.chunks(1000) {
            let batch = chunk
                .iter()
                .map(|n| {
                    let mut options = JobOptions::new().remove_on_complete(Retention::None);
                    if let Some(g) = groups {
                        options = options.group(format!("tenant-{}", n % g));
                    }
                    BulkJob::new("job", *n).options(options)
                })
                .collect();
            queue.add_bulk(batch).await?;
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>((app, queue))
    })?;
    redis.reset_stats()?;
    let started = Instant::now();
    let elapsed = runtime.block_on(async {
        let workers = app.start_workers().await?;
        while done.load(Ordering::Relaxed) < jobs {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let elapsed = started.elapsed();
        workers.shutdown(Duration::from_secs(10)).await;
        drop(queue);
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(elapsed)
    })?;
    let (calls, script_us) = stats(redis)?;
    Ok(Run {
        jobs_per_sec: jobs as f64 / elapsed.as_secs_f64(),
        commands_per_job: calls as f64 / jobs as f64,
        script_us_per_job: script_us as f64 / jobs as f64,
    })
}

fn label(groups: Option<u64>) -> String {
    match groups {
        None => "ungrouped".to_owned(),
        Some(1) => "1 group".to_owned(),
        Some(n) => format!("{n} groups"),
    }
}

pub(super) fn measure(redis: &mut BenchRedis, settings: Settings) -> BenchResult<String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut text = format!(
        "### Fair groups\n\n\
         {} no-op jobs pre-filled, spread evenly over the groups, processed by one grouped \
         worker (no group limits: the cost of taking turns); ungrouped jobs on an ordinary \
         worker in the same rounds. Medians of {} rounds; commands and script time per job \
         from `INFO commandstats` while the workers ran (every command the workers sent: \
         takes, finishes, group releases, lock renewals, stalled checks).\n\n\
         | concurrency | jobs in | jobs/s | of ungrouped | Redis commands/job | script µs/job |\n\
         |---|---|---|---|---|---|\n",
        settings.jobs, settings.rounds
    );
    for concurrency in CONCURRENCY {
        let mut runs: Vec<Vec<Run>> = vec![Vec::new(); SHAPES.len()];
        for round in 0..settings.rounds {
            let order: Vec<usize> = (0..SHAPES.len()).collect();
            for i in rotated(&order, round) {
                let run = run_once(redis, &runtime, settings.jobs, SHAPES[i], concurrency)?;
                eprintln!(
                    "groups: concurrency {concurrency}, {}, round {round}: {run:?}",
                    label(SHAPES[i])
                );
                runs[i].push(run);
            }
        }
        let med = |i: usize, f: fn(&Run) -> f64| median(&runs[i].iter().map(f).collect::<Vec<_>>());
        let ungrouped = med(0, |r| r.jobs_per_sec);
        for (i, shape) in SHAPES.iter().enumerate() {
            let rate = med(i, |r| r.jobs_per_sec);
            text.push_str(&format!(
                "| {concurrency} | {} | {rate:.0} | {:.2} | {:.1} | {:.0} |\n",
                label(*shape),
                rate / ungrouped,
                med(i, |r| r.commands_per_job),
                med(i, |r| r.script_us_per_job),
            ));
        }
    }
    text.push('\n');
    Ok(text)
}
