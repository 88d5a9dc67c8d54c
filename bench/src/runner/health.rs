//! The probes' cost: Redis commands per liveness and readiness probe of an app with 20
//! queues (each with a worker), and processing throughput with probes at 10/s against
//! without, in alternating rounds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queue_core::{
    app::Registrations, health::HealthSettings, queue::BulkJob, Job, JobError, JobOptions,
    Processor, QueueApp,
};

use super::redis::BenchRedis;
use super::{rotated, Settings};
use crate::BenchResult;

const QUEUES: usize = 20;
const PROBES: u64 = 100;

async fn noop(_: Job<u64>) -> Result<(), JobError> {
    Ok(())
}

fn queue_name(i: usize) -> String {
    format!("bench-health-{i}")
}

async fn app(url: &str) -> BenchResult<QueueApp> {
    let mut builder = QueueApp::builder()
        .redis(url)
        .registrations(Registrations::None)
        .command_timeout(Duration::from_secs(60));
    for i in 0..QUEUES {
        builder = builder.processor(Processor::new(queue_name(i)).concurrency(10).any_job(noop));
    }
    Ok(builder.build().await?)
}

/// The commands the probes send (the workers send none of these: their polling is
/// scripts and blocking pops; the memory guard's is `INFO`), counted since the last
/// reset.
const PROBE_COMMANDS: [&str; 5] = ["ping", "llen", "zcard", "hmget", "pttl"];

fn probe_calls(redis: &mut BenchRedis) -> BenchResult<u64> {
    let info = redis.info("commandstats")?;
    Ok(info
        .lines()
        .filter_map(|l| {
            let (name, stats) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            PROBE_COMMANDS.contains(&name).then_some(stats)
        })
        .filter_map(|stats| stats.split(',').find_map(|p| p.strip_prefix("calls=")))
        .filter_map(|v| v.parse::<u64>().ok())
        .sum())
}

/// Commands per probe of each kind: readiness, liveness with workers idle past the
/// period (it asks Redis about each queue: one pipeline of O(1) commands), and liveness
/// with workers that took a job within it (it asks nothing).
fn commands_per_probe(
    redis: &mut BenchRedis,
    runtime: &tokio::runtime::Runtime,
) -> BenchResult<Vec<(String, f64)>> {
    let url = redis.url();
    let app = runtime.block_on(app(&url))?;
    let workers = runtime.block_on(app.start_workers())?;
    let idle = app.health(HealthSettings::new().wedged_after(Duration::from_millis(1)));
    let busy = app.health(HealthSettings::new().wedged_after(Duration::from_secs(3600)));
    let mut figures = Vec::new();
    for (label, health, live) in [
        ("readiness", &busy, false),
        ("liveness, workers idle past the period", &idle, true),
        ("liveness, workers that took a job within it", &busy, true),
    ] {
        redis.reset_stats()?;
        runtime.block_on(async {
            for _ in 0..PROBES {
                if live {
                    let _ = health.live().await;
                } else {
                    let _ = health.ready().await;
                }
            }
        });
        figures.push((label.to_owned(), probe_calls(redis)? as f64 / PROBES as f64));
    }
    runtime.block_on(workers.shutdown(Duration::from_secs(10)));
    Ok(figures)
}

/// Jobs per second through one of the 20 queues, with probes at 10/s or without.
fn throughput(
    redis: &mut BenchRedis,
    runtime: &tokio::runtime::Runtime,
    jobs: u64,
    probes: bool,
) -> BenchResult<f64> {
    redis.flush()?;
    let url = redis.url();
    runtime.block_on(async {
        let app = app(&url).await?;
        let queue = app.queue::<u64>(&queue_name(0))?;
        let all: Vec<u64> = (0..jobs).collect();
        for chunk in all.chunks(1000) {
            let batch = chunk
                .iter()
                .map(|n| {
                    BulkJob::new("job", *n)
                        .options(JobOptions::new().remove_on_complete(queue_core::Retention::None))
                })
                .collect();
            queue.add_bulk(batch).await?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let prober = probes.then(|| {
            let health = app.health(HealthSettings::new());
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(Duration::from_millis(100));
                while !stop.load(Ordering::Relaxed) {
                    every.tick().await;
                    let _ = health.live().await;
                    let _ = health.ready().await;
                }
            })
        });
        let started = Instant::now();
        let workers = app.start_workers().await?;
        loop {
            let counts = queue.get_job_counts().await?;
            if counts.waiting + counts.active + counts.prioritized == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let rate = jobs as f64 / started.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        if let Some(prober) = prober {
            let _ = prober.await;
        }
        workers.shutdown(Duration::from_secs(10)).await;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(rate)
    })
}

pub(super) fn measure(redis: &mut BenchRedis, settings: Settings) -> BenchResult<String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    redis.flush()?;
    let per_probe = commands_per_probe(redis, &runtime)?;
    let mut with = Vec::new();
    let mut without = Vec::new();
    for round in 0..settings.rounds {
        for probes in rotated(&[false, true], round) {
            let rate = throughput(redis, &runtime, settings.jobs, probes)?;
            eprintln!("health: round {round}, probes {probes}: {rate:.0} jobs/s");
            if probes {
                with.push(rate)
            } else {
                without.push(rate)
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (with, without) = (median(&mut with), median(&mut without));
    let mut text = format!(
        "### Health probes\n\n\
         An app of {QUEUES} queues, a worker each (concurrency 10). Redis commands per probe \
         (`INFO commandstats`; a liveness probe that asks sends one pipeline per queue):\n\n\
         | probe | Redis commands per probe |\n|---|---|\n"
    );
    for (label, n) in per_probe {
        text.push_str(&format!("| {label} | {n:.1} |\n"));
    }
    text.push_str(&format!(
        "\nProcessing {} no-op jobs on one of the queues, medians of {} rounds: \
         **{without:.0} jobs/s** without probes, **{with:.0} jobs/s** with a liveness and a \
         readiness probe every 100 ms: **{:.2}** of without.\n\n",
        settings.jobs,
        settings.rounds,
        with / without
    ));
    Ok(text)
}
