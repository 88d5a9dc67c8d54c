//! Fair groups' cost (issue #45): processing throughput at concurrency 10 and 100 with
//! 1, 10, 100 and 10,000 groups, 10,000 groups under a concurrency and rate limit, and
//! 10,000 groups of jobs a Node producer added (adopted from `wait`), against ungrouped
//! jobs (each grouped run between two ungrouped ones), with the Redis commands and
//! script time each processed job cost (`INFO commandstats`); and the add side, grouped
//! against ungrouped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queue_core::{
    app::Registrations, group::GroupLimits, queue::BulkJob, Dep, Job, JobError, JobOptions,
    Processor, QueueApp, Retention,
};

use super::redis::BenchRedis;
use super::stats::median;
use super::systems::System;
use super::{rotated, Settings};
use crate::BenchResult;

const QUEUE: &str = "bench-groups";
const CONCURRENCY: [usize; 2] = [10, 100];

/// One row of the table: how jobs are spread, limited and added.
#[derive(Debug, Clone, Copy)]
struct Shape {
    /// `None`: ungrouped jobs and worker; `Some(n)`: jobs spread over `n` groups.
    groups: Option<u64>,
    /// Each group at most 2 at once and 100 starts a second.
    limited: bool,
    /// Added by Node BullMQ 6 (`{ group: { id } }`, into `wait`), not by us.
    node_producer: bool,
}

impl Shape {
    const fn of(groups: Option<u64>) -> Self {
        Shape {
            groups,
            limited: false,
            node_producer: false,
        }
    }

    fn label(self) -> String {
        let spread = match self.groups {
            None => "ungrouped".to_owned(),
            Some(1) => "1 group".to_owned(),
            Some(n) => format!("{} groups", super::charts::number(n as f64)),
        };
        match (self.limited, self.node_producer) {
            (true, _) => format!("{spread}, concurrency 2 + 100/s each"),
            (_, true) => format!("{spread}, added by Node"),
            _ => spread,
        }
    }
}

const SHAPES: [Shape; 7] = [
    Shape::of(None),
    Shape::of(Some(1)),
    Shape::of(Some(10)),
    Shape::of(Some(100)),
    Shape::of(Some(10_000)),
    Shape {
        groups: Some(10_000),
        limited: true,
        node_producer: false,
    },
    Shape {
        groups: Some(10_000),
        limited: false,
        node_producer: true,
    },
];
/// The rows the targets compare: ungrouped, 10,000 groups, limited, added by Node.
const UNGROUPED: usize = 0;
const MANY: usize = 4;
const LIMITED: usize = 5;
const ADOPTED: usize = 6;

async fn count(_: Job<serde_json::Value>, done: Dep<AtomicU64>) -> Result<(), JobError> {
    done.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// One run's figures.
#[derive(Debug, Clone, Copy)]
struct Run {
    /// Our `add_bulk` of the jobs (none when Node added them).
    adds_per_sec: Option<f64>,
    jobs_per_sec: f64,
    commands_per_job: f64,
    script_us_per_job: f64,
}

/// Every command's calls, and the microseconds spent in scripts (`EVALSHA`, `EVAL` and
/// `FCALL`, the grouped scripts' where Redis has functions), since the last reset.
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
        if matches!(name, "evalsha" | "eval" | "fcall") {
            script_us += read("usec=");
        }
    }
    Ok((calls, script_us))
}

/// Adds the jobs as our producer does, timed.
async fn add_ours(
    queue: &queue_core::Queue<serde_json::Value>,
    jobs: u64,
    groups: Option<u64>,
) -> BenchResult<f64> {
    let started = Instant::now();
    let all: Vec<u64> = (0..jobs).collect();
    for chunk in all.chunks(1000) {
        let batch = chunk
            .iter()
            .map(|n| {
                let mut options = JobOptions::new().remove_on_complete(Retention::None);
                if let Some(g) = groups {
                    options = options.group(format!("tenant-{}", n % g));
                }
                BulkJob::new("job", serde_json::json!(n)).options(options)
            })
            .collect();
        queue.add_bulk(batch).await?;
    }
    Ok(jobs as f64 / started.elapsed().as_secs_f64())
}

fn run_once(
    redis: &mut BenchRedis,
    runtime: &tokio::runtime::Runtime,
    jobs: u64,
    shape: Shape,
    concurrency: usize,
) -> BenchResult<Run> {
    redis.flush()?;
    let url = redis.url();
    if shape.node_producer {
        let jobs = jobs.to_string();
        let groups = shape.groups.unwrap_or(1).to_string();
        System::Node.run(&url, &["enqueue", QUEUE, "bulk", &jobs, &groups])?;
    }
    let done = Arc::new(AtomicU64::new(0));
    let (app, queue, adds_per_sec) = runtime.block_on(async {
        let mut processor = Processor::new(QUEUE)
            .concurrency(concurrency)
            .any_job(count);
        if shape.groups.is_some() {
            let mut limits = GroupLimits::new();
            if shape.limited {
                limits = limits.concurrency(2).rate(100, Duration::from_secs(1));
            }
            processor = processor.groups(limits);
        }
        let app = QueueApp::builder()
            .redis(url.clone())
            .registrations(Registrations::None)
            .command_timeout(Duration::from_secs(60))
            .provide_arc(done.clone())
            .processor(processor)
            .build()
            .await?;
        let queue = app.queue::<serde_json::Value>(QUEUE)?;
        let adds_per_sec = match shape.node_producer {
            true => None,
            false => Some(add_ours(&queue, jobs, shape.groups).await?),
        };
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>((app, queue, adds_per_sec))
    })?;
    redis.reset_stats()?;
    let started = Instant::now();
    let elapsed = runtime.block_on(async {
        let workers = app.start_workers().await?;
        while done.load(Ordering::Relaxed) < jobs {
            if started.elapsed() > Duration::from_secs(300) {
                return Err(format!("{}: not done after 300 s", shape.label()).into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let elapsed = started.elapsed();
        workers.shutdown(Duration::from_secs(10)).await;
        drop(queue);
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(elapsed)
    })?;
    let (calls, script_us) = stats(redis)?;
    Ok(Run {
        adds_per_sec,
        jobs_per_sec: jobs as f64 / elapsed.as_secs_f64(),
        commands_per_job: calls as f64 / jobs as f64,
        script_us_per_job: script_us as f64 / jobs as f64,
    })
}

/// A target's line: the figure, the bar and whether it holds.
fn judged(what: &str, figure: f64, bar: f64, at_least: bool) -> String {
    let printed: f64 = format!("{figure:.2}").parse().unwrap_or(figure);
    let met = if at_least {
        printed >= bar
    } else {
        printed <= bar
    };
    let (sign, verdict) = match (at_least, met) {
        (true, true) => ("≥", "met"),
        (true, false) => ("≥", "**missed**"),
        (false, true) => ("≤", "met"),
        (false, false) => ("≤", "**missed**"),
    };
    format!("| {what} | {figure:.2} | {sign} {bar} | {verdict} |\n")
}

pub(super) fn measure(redis: &mut BenchRedis, settings: Settings) -> BenchResult<String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // Runs of a second or two move by a fifth from one to the next on a shared VM, and
    // by as much over a round: at least five rounds, and each grouped run judged against
    // the ungrouped runs on either side of it.
    let rounds = settings.rounds.max(5);
    let mut text = format!(
        "### Fair groups\n\n\
         {} no-op jobs pre-filled, spread evenly over the groups (10,000 groups: {} \
         each, a group costing nearly the most it can), processed by one grouped worker; ungrouped \
         jobs on an ordinary worker in the same rounds. \"Concurrency 2 + 100/s each\": every \
         group limited to 2 running jobs and 100 starts a second. \"Added by Node\": Node \
         BullMQ 6 added the jobs with `{{ group: {{ id }} }}` into `wait`, and the worker's \
         takes adopted them into their groups. {} rounds, each running every grouped shape \
         once (in an order rotated from round to round) with an ungrouped run before the \
         first and after each; \"of ungrouped\" is the median of each grouped run's ratio \
         to the mean of the two ungrouped runs around it, the other columns medians of the \
         runs. Commands and script time per job from `INFO commandstats` while the \
         workers ran (every command the workers sent: takes, finishes, lock renewals, \
         stalled checks).\n\n\
         | concurrency | jobs in | jobs/s | of ungrouped | Redis commands/job | script µs/job |\n\
         |---|---|---|---|---|---|\n",
        settings.jobs,
        match settings.jobs {
            0..=9_999 => "one job or none".to_owned(),
            10_000 => "one job".to_owned(),
            n if n % 10_000 == 0 => format!("{} jobs", n / 10_000),
            n => format!("{:.1} jobs on average", n as f64 / 10_000.0),
        },
        rounds
    );
    let mut targets = String::from(
        "\nTargets (issue #45), each a ratio to ungrouped in the same rounds:\n\n\
         | target | figure | bar | |\n|---|---|---|---|\n",
    );
    let mut adds: Vec<(f64, f64)> = Vec::new();
    let mut add_ratios: Vec<f64> = Vec::new();
    let grouped_shapes: Vec<usize> = (0..SHAPES.len()).filter(|&i| i != UNGROUPED).collect();
    for concurrency in CONCURRENCY {
        let mut runs: Vec<Vec<Run>> = vec![Vec::new(); SHAPES.len()];
        // Each grouped run's ratio to the mean of the ungrouped runs just before and
        // just after it.
        let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); SHAPES.len()];
        let mut run_logged = |shape: usize, round: usize| {
            let run = run_once(redis, &runtime, settings.jobs, SHAPES[shape], concurrency)?;
            eprintln!(
                "groups: concurrency {concurrency}, {}, round {round}: {run:?}",
                SHAPES[shape].label()
            );
            BenchResult::Ok(run)
        };
        for round in 0..rounds {
            let mut before = run_logged(UNGROUPED, round)?;
            runs[UNGROUPED].push(before);
            for i in rotated(&grouped_shapes, round) {
                let run = run_logged(i, round)?;
                let after = run_logged(UNGROUPED, round)?;
                ratios[i].push(2.0 * run.jobs_per_sec / (before.jobs_per_sec + after.jobs_per_sec));
                if let (true, Some(add), Some(b), Some(a)) = (
                    i == MANY,
                    run.adds_per_sec,
                    before.adds_per_sec,
                    after.adds_per_sec,
                ) {
                    adds.push(((a + b) / 2.0, add));
                    add_ratios.push(2.0 * add / (a + b));
                }
                runs[i].push(run);
                runs[UNGROUPED].push(after);
                before = after;
            }
        }
        let med = |i: usize, f: fn(&Run) -> f64| median(&runs[i].iter().map(f).collect::<Vec<_>>());
        let ratio = |i: usize| {
            if i == UNGROUPED {
                1.0
            } else {
                median(&ratios[i])
            }
        };
        for (i, shape) in SHAPES.iter().enumerate() {
            text.push_str(&format!(
                "| {concurrency} | {} | {:.0} | {:.2} | {:.1} | {:.0} |\n",
                shape.label(),
                med(i, |r| r.jobs_per_sec),
                ratio(i),
                med(i, |r| r.commands_per_job),
                med(i, |r| r.script_us_per_job),
            ));
        }
        targets.push_str(&judged(
            &format!("10,000 groups, no limits, concurrency {concurrency}"),
            ratio(MANY),
            0.8,
            true,
        ));
        targets.push_str(&judged(
            &format!("10,000 groups, Redis commands a job, concurrency {concurrency}"),
            med(MANY, |r| r.commands_per_job),
            28.0,
            false,
        ));
        targets.push_str(&judged(
            &format!("concurrency 2 + rate limit, concurrency {concurrency}"),
            ratio(LIMITED),
            0.75,
            true,
        ));
        targets.push_str(&judged(
            &format!("added by Node, concurrency {concurrency}"),
            ratio(ADOPTED),
            0.7,
            true,
        ));
        let spread: Vec<f64> = (1..=MANY).map(ratio).collect();
        let (low, high) = spread
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
        targets.push_str(&judged(
            &format!("flat from 1 to 10,000 groups (slowest/fastest), concurrency {concurrency}"),
            low / high,
            0.9,
            true,
        ));
    }
    let plain = median(&adds.iter().map(|a| a.0).collect::<Vec<_>>());
    let grouped = median(&adds.iter().map(|a| a.1).collect::<Vec<_>>());
    let add_ratio = median(&add_ratios);
    text.push_str(&format!(
        "\nAdds (`add_bulk` of 1,000 at a time, the fill of the runs above, {} fills each): \
         ungrouped {plain:.0} jobs/s (the mean of the two fills around each grouped one), \
         into 10,000 groups {grouped:.0} jobs/s (medians); the median of the ratios \
         {add_ratio:.2}.\n",
        adds.len()
    ));
    targets.push_str(&judged(
        "a grouped add (10,000 groups)",
        add_ratio,
        0.9,
        true,
    ));
    text.push_str(&targets);
    text.push('\n');
    Ok(text)
}
