//! Batch workers (issue #46): no-op jobs processed in batches (`Processor::batch`)
//! against our single-job worker at concurrency 100, the baseline, in the same rounds on
//! the same Redis: jobs/s, each batch run as a ratio to the single-job runs on either
//! side of it (this VM's speed drifts by a fifth within a round), and the Redis
//! commands each processed job cost (`INFO commandstats`); and the add side, our
//! `add_bulk` in chunks of 100 and 1,000 against `add`.
//!
//! Every run is a child process (`queue-bench work` for the single-job worker, the very
//! run of the throughput suite's concurrency 100; `queue-bench batch` for a batch
//! worker) on jobs the raw engine's `add_bulk` put in `wait` before it started, timed
//! from the first handler start to the last job in the completed set.

use std::collections::BTreeMap;

use super::batch_floor::{self, Floor, Place};
use super::commands::{calls, Calls};
use super::findings::{Findings, Wanted};
use super::redis::BenchRedis;
use super::stats::{median, paired, quantile};
use super::suites::field;
use super::systems::System;
use super::{rotated, Settings};
use crate::BenchResult;

/// The single-job worker's queue: the `#[processor]` at concurrency 100 of the
/// throughput suite.
const SINGLE_QUEUE: &str = "bench-c100";
/// The batch workers' queue (each run registers its own processor there).
const BATCH_QUEUE: &str = "bench-batch";

/// One row of the table: which worker, and how it takes its jobs.
#[derive(Debug, Clone, Copy)]
struct Shape {
    system: System,
    /// `None`: the single-job worker; `Some(n)`: batches of up to `n` jobs.
    size: Option<usize>,
    /// Jobs at once for the single-job worker, batches at once for a batch worker.
    concurrency: usize,
    /// The handler's sleep per batch, ms (0: a no-op).
    sleep_ms: u64,
}

impl Shape {
    const fn batch(size: usize, concurrency: usize) -> Self {
        Shape {
            system: System::Ours,
            size: Some(size),
            concurrency,
            sleep_ms: 0,
        }
    }

    fn worker(self) -> &'static str {
        match (self.system, self.size) {
            (System::Ours, None) => "ours, single-job (`#[processor]`)",
            (System::Ours, Some(_)) => "ours, `Processor::batch`",
            (_, None) => "raw engine, single-job",
            (_, Some(_)) => "raw engine, `WorkerOptions::batch`",
        }
    }

    fn label(self) -> String {
        let mut label = match self.size {
            None => format!("1 job × {}", self.concurrency),
            Some(size) => format!("{size} × {}", self.concurrency),
        };
        if self.sleep_ms > 0 {
            label.push_str(&format!(", {} ms sleep a batch", self.sleep_ms));
        }
        label
    }

    /// The child's arguments for `jobs` waiting jobs.
    fn args(self, jobs: &str) -> Vec<String> {
        let owned = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        match self.size {
            None => owned(&["work", SINGLE_QUEUE, &self.concurrency.to_string(), jobs]),
            Some(size) => owned(&[
                "batch",
                BATCH_QUEUE,
                &size.to_string(),
                &self.concurrency.to_string(),
                jobs,
                &self.sleep_ms.to_string(),
            ]),
        }
    }

    fn queue(self) -> &'static str {
        match self.size {
            None => SINGLE_QUEUE,
            Some(_) => BATCH_QUEUE,
        }
    }
}

const SHAPES: [Shape; 7] = [
    Shape {
        system: System::Ours,
        size: None,
        concurrency: 100,
        sleep_ms: 0,
    },
    Shape::batch(100, 1),
    Shape::batch(100, 2),
    Shape::batch(100, 4),
    Shape::batch(10, 10),
    Shape {
        sleep_ms: 1,
        ..Shape::batch(100, 4)
    },
    Shape {
        system: System::Raw,
        ..Shape::batch(100, 4)
    },
];
/// The baseline: our single-job worker at concurrency 100.
const SINGLE: usize = 0;
/// The row the targets judge, chosen before any run: batches of 100, 4 at once. Not the
/// best of the rows (that would pick the luckiest), and not concurrency 1, whose worker
/// leaves Redis idle while a batch's finish and the next take go one after the other:
/// with a few batches in flight a take overlaps a finish and Redis is kept busy, as the
/// baseline's 100 jobs in flight keep it.
const TARGET: usize = 3;
/// Batches of 10, the commands' other row.
const BATCH_10: usize = 4;

/// One run's figures.
#[derive(Debug, Clone)]
struct Run {
    jobs_per_sec: f64,
    commands_per_job: f64,
    /// Redis's CPU time per job over the child's life (start-up included, when Redis
    /// is idle), µs.
    redis_us_per_job: f64,
    /// The worker process's CPU time per job, first start to last completion, µs.
    worker_us_per_job: f64,
    /// Every command's calls, the bench's own taken out.
    calls: Calls,
}

fn run_once(redis: &mut BenchRedis, jobs: u64, shape: Shape) -> BenchResult<Run> {
    redis.flush()?;
    let url = redis.url();
    let n = jobs.to_string();
    let queue = shape.queue();
    System::Raw.run(&url, &["enqueue", queue, "bulk", &n])?;
    redis.reset_stats()?;
    let cpu_before = redis.cpu_seconds()?;
    let args = shape.args(&n);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = shape.system.run(&url, &args)?;
    let redis_cpu = redis.cpu_seconds()? - cpu_before;
    let mut counted = calls(redis)?;
    // The bench's own reset and readings, and the timing loop's polls.
    counted.remove("config|resetstat");
    counted.remove("info");
    if let Some(zcard) = counted.get_mut("zcard") {
        *zcard -= result["polls"].as_f64().unwrap_or(0.0);
    }
    // Every job done, and done once: none failed, none left behind.
    let (completed, failed) = (
        redis.zcard(queue, "completed")?,
        redis.zcard(queue, "failed")?,
    );
    let waiting = redis.waiting(queue)?;
    if completed != jobs || failed != 0 || waiting != 0 {
        return Err(format!(
            "{} {}: {completed} completed, {failed} failed, {waiting} waiting of {jobs}",
            shape.worker(),
            shape.label()
        )
        .into());
    }
    let per_job = |total: f64| total / jobs as f64;
    Ok(Run {
        jobs_per_sec: jobs as f64 / field(&result, "ms")? * 1000.0,
        commands_per_job: per_job(counted.values().sum()),
        redis_us_per_job: per_job(redis_cpu * 1e6),
        worker_us_per_job: per_job(field(&result, "cpuMs")? * 1000.0),
        calls: counted,
    })
}

/// The commands of a shape's runs per job, most first: `evalsha 2.00, lrem 1.00, ..`.
fn by_command(runs: &[Run], jobs: u64) -> String {
    let mut sums: BTreeMap<&str, f64> = BTreeMap::new();
    for run in runs {
        for (name, calls) in &run.calls {
            *sums.entry(name.as_str()).or_default() += calls;
        }
    }
    let all_jobs = (jobs * runs.len() as u64) as f64;
    let hundredths = |v: f64| (v / all_jobs * 100.0).round() as i64;
    let mut named: Vec<(&str, f64)> = sums
        .into_iter()
        .filter(|(_, calls)| hundredths(*calls) != 0)
        .collect();
    named.sort_by(|a, b| hundredths(b.1).cmp(&hundredths(a.1)).then(a.0.cmp(b.0)));
    named
        .iter()
        .map(|(name, calls)| format!("{name} {:.2}", calls / all_jobs))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The add side's modes: our `add` and `add_bulk` (the enqueue suite's probe).
const ADD_MODES: [(&str, &str); 4] = [
    ("single", "`add`, one at a time"),
    ("inflight", "`add`, 100 in flight"),
    ("bulk100", "`add_bulk`, chunks of 100"),
    ("bulk", "`add_bulk`, chunks of 1,000"),
];
/// The add side's baseline: 100 adds in flight.
const ADD_BASELINE: usize = 1;

fn adds(redis: &mut BenchRedis, settings: Settings, rounds: usize) -> BenchResult<String> {
    // One at a time is slow: as in the enqueue suite, at most 2,000 of them.
    let sizes = ADD_MODES.map(|(mode, _)| match mode {
        "single" => settings.jobs.min(2_000),
        _ => settings.jobs,
    });
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); ADD_MODES.len()];
    let order: Vec<usize> = (0..ADD_MODES.len()).collect();
    for round in 0..rounds {
        for i in rotated(&order, round) {
            redis.flush()?;
            let n = sizes[i].to_string();
            let result = System::Ours.run(
                &redis.url(),
                &["enqueue", "bench-enqueue", ADD_MODES[i].0, &n],
            )?;
            rates[i].push(sizes[i] as f64 / field(&result, "ms")? * 1000.0);
        }
    }
    eprintln!("batches, adds: {rates:?}");
    let mut out = format!(
        "\nThe add side: ours, {rounds} rounds, the four modes in an order rotated from \
         round to round; \"of 100 in flight\" is the median of each round's own ratio \
         (with their interquartile range). The enqueue suite has `add` and chunks of \
         1,000 against the other systems.\n\n\
         | mode | jobs | jobs/s | of 100 in flight |\n|---|---|---|---|\n"
    );
    for (i, (_, label)) in ADD_MODES.iter().enumerate() {
        let of = paired(&rates[i], &rates[ADD_BASELINE]);
        out.push_str(&format!(
            "| {label} | {} | {:.0} | {:.2} ({:.2} to {:.2}) |\n",
            sizes[i],
            median(&rates[i]),
            of.median,
            of.q1,
            of.q3
        ));
    }
    Ok(out)
}

pub(super) fn measure(
    redis: &mut BenchRedis,
    settings: Settings,
    findings: &mut Findings,
) -> BenchResult<String> {
    // As in the groups suite: runs of a second move by a fifth from one to the next on
    // this VM, so at least five rounds, each batch run judged against the single-job
    // runs on either side of it.
    let rounds = settings.rounds.max(5);
    let jobs = settings.jobs;
    let load_at_start = load_average();
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); SHAPES.len()];
    // Each batch run's jobs/s over the mean of the single-job runs just before and just
    // after it.
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); SHAPES.len()];
    let others: Vec<usize> = (0..SHAPES.len()).filter(|&i| i != SINGLE).collect();
    // Each floor's Redis CPU a job, and the single-job runs' around it over it.
    let mut floors: Vec<Vec<f64>> = vec![Vec::new(); Floor::ALL.len()];
    let mut ceilings: Vec<Vec<f64>> = vec![Vec::new(); Floor::ALL.len()];
    let run_logged = |redis: &mut BenchRedis, i: usize, round: usize| {
        let run = run_once(redis, jobs, SHAPES[i])?;
        eprintln!(
            "batches: {} {}, round {round}: {:.0} jobs/s, {:.2} commands/job, Redis {:.1} µs/job, worker {:.1} µs/job",
            SHAPES[i].worker(),
            SHAPES[i].label(),
            run.jobs_per_sec,
            run.commands_per_job,
            run.redis_us_per_job,
            run.worker_us_per_job,
        );
        BenchResult::Ok(run)
    };
    for round in 0..rounds {
        let mut before = run_logged(redis, SINGLE, round)?;
        for i in rotated(&others, round) {
            let run = run_logged(redis, i, round)?;
            let after = run_logged(redis, SINGLE, round)?;
            ratios[i].push(2.0 * run.jobs_per_sec / (before.jobs_per_sec + after.jobs_per_sec));
            runs[i].push(run);
            runs[SINGLE].push(before);
            before = after;
        }
        // The floors, judged as the rows are: against the single-job runs around them.
        let place = Place {
            queue: BATCH_QUEUE,
            size: SHAPES[TARGET].size.expect("the target row is a batch row"),
        };
        let floor_us = Floor::ALL
            .iter()
            .map(|&floor| batch_floor::run(redis, place, jobs, floor))
            .collect::<BenchResult<Vec<f64>>>()?;
        let after = run_logged(redis, SINGLE, round)?;
        let single_us = (before.redis_us_per_job + after.redis_us_per_job) / 2.0;
        for (k, us) in floor_us.into_iter().enumerate() {
            eprintln!(
                "batches: floor, {}, round {round}: Redis {us:.1} µs/job",
                Floor::ALL[k].label()
            );
            floors[k].push(us);
            ceilings[k].push(single_us / us);
        }
        runs[SINGLE].push(before);
        before = after;
        runs[SINGLE].push(before);
    }
    let med = |i: usize, f: fn(&Run) -> f64| median(&runs[i].iter().map(f).collect::<Vec<_>>());
    let mut out = format!(
        "### Batches (#46)\n\n\
         {jobs} no-op jobs pre-filled (the raw engine's `add_bulk`) per run, each run a \
         process of its own. The baseline is our single-job worker at concurrency 100 (the \
         throughput suite's run); the batch workers are `Processor::batch` with a handler \
         of `Batch<Email>` answering `BatchResult::new()` (every job completed), waiting \
         up to {wait} ms for a batch to fill (reached at most once, at the end: every job \
         waits from the start), and the raw engine's `WorkerOptions::batch` for reference. \
         \"Size × concurrency\": jobs a batch, batches at once (for the baseline, jobs at \
         once). {rounds} rounds, each running every batch row once (in an order rotated \
         from round to round) with a single-job run before the first and after each; \"of \
         single\" is the median of each batch run's ratio to the mean of the two single-job \
         runs around it (and their interquartile range), the other columns medians of the \
         runs. Commands per job from `INFO commandstats` over the worker process's life \
         (its start, takes, finishes, idle waits and checks; the timing loop's polls taken \
         out); Redis CPU over the same span; worker CPU from the first handler start to \
         the last completion.\n\n\
         | worker | size × concurrency | jobs/s | of single | Redis commands/job | Redis CPU µs/job | worker CPU µs/job |\n\
         |---|---|---|---|---|---|---|\n",
        wait = crate::probe::Batching::WAIT_MS,
    );
    for (i, shape) in SHAPES.iter().enumerate() {
        let of_single = if i == SINGLE {
            "1".to_owned()
        } else {
            format!(
                "{:.2} ({:.2} to {:.2})",
                median(&ratios[i]),
                quantile(&ratios[i], 0.25),
                quantile(&ratios[i], 0.75)
            )
        };
        out.push_str(&format!(
            "| {}{} | {} | {:.0} | {of_single} | {:.2} | {:.1} | {:.1} |\n",
            shape.worker(),
            if i == TARGET { " **(target)**" } else { "" },
            shape.label(),
            med(i, |r| r.jobs_per_sec),
            med(i, |r| r.commands_per_job),
            med(i, |r| r.redis_us_per_job),
            med(i, |r| r.worker_us_per_job),
        ));
    }
    out.push_str("\nCommands per job by command (all of a row's runs):\n\n");
    for i in [SINGLE, TARGET, BATCH_10] {
        out.push_str(&format!(
            "- {} {}: {}\n",
            SHAPES[i].worker(),
            SHAPES[i].label(),
            by_command(&runs[i], jobs)
        ));
    }
    let raw = SHAPES.len() - 1;
    out.push_str(&format!(
        "\nOurs against the raw engine's batch worker, both 100 × 4: {:.2} (the ratio of \
         their medians of \"of single\").\n",
        median(&ratios[TARGET]) / median(&ratios[raw])
    ));
    let redis_of_single = med(SINGLE, |r| r.redis_us_per_job) / med(TARGET, |r| r.redis_us_per_job);
    out.push_str(&format!(
        "\nRedis's ceiling. Redis is what bounds both the single-job worker and the batch \
         rows here, so a batch row's jobs/s over the single-job worker's is about the \
         single-job worker's Redis CPU a job over the row's. The floors (`batch_floor.rs`) \
         keep a record of each job and do nothing else: no lock checked at the finish, no \
         limit, no retention, no metrics. BullMQ's record is the job's hash read, its start \
         and end written, its lock, its `active` and `completed` events; two floors drop \
         a part of it that other BullMQ clients read. \"Single ÷ this\" is the median of \
         each round's single-job Redis CPU a job (the runs either side) over the floor's, \
         with its interquartile range.\n\n\
         | record | Redis CPU µs/job | single ÷ this |\n|---|---|---|\n\
         | ours, `Processor::batch` 100 × 4 (the target row) | {:.1} | {redis_of_single:.2} |\n",
        med(TARGET, |r| r.redis_us_per_job),
    ));
    for (k, floor) in Floor::ALL.iter().enumerate() {
        out.push_str(&format!(
            "| floor: {} | {:.1} | {:.2} ({:.2} to {:.2}) |\n",
            floor.label(),
            median(&floors[k]),
            median(&ceilings[k]),
            quantile(&ceilings[k], 0.25),
            quantile(&ceilings[k], 0.75),
        ));
    }
    eprintln!("batches, of single: {ratios:?}; floors' ceilings: {ceilings:?}");
    findings.target(
        "batch of 100 / single at concurrency 100",
        "#46",
        Wanted::AtLeast(4.0),
        median(&ratios[TARGET]),
        format!(
            "(batches of 100, 4 at once, chosen before the run; median of {} runs' ratios \
             to the single-job runs around each, IQR {:.2} to {:.2}; 100 × 1: {:.2}, \
             100 × 2: {:.2}; single's Redis CPU a job over this row's: {:.2}, over the \
             floors': {:.2} for BullMQ's record in a script, {:.2} without the `active` \
             events, {:.2} also with a lock a batch, {:.2} in plain commands)",
            ratios[TARGET].len(),
            quantile(&ratios[TARGET], 0.25),
            quantile(&ratios[TARGET], 0.75),
            median(&ratios[1]),
            median(&ratios[2]),
            redis_of_single,
            median(&ceilings[0]),
            median(&ceilings[1]),
            median(&ceilings[2]),
            median(&ceilings[3]),
        ),
    );
    findings.target(
        "Redis commands per job, batch of 100",
        "#46",
        Wanted::AtMost(8.0),
        med(TARGET, |r| r.commands_per_job),
        format!(
            "(100 × 4, median of its runs; the single-job worker at concurrency 100: {:.2}, \
             batches of 10: {:.2})",
            med(SINGLE, |r| r.commands_per_job),
            med(BATCH_10, |r| r.commands_per_job),
        ),
    );
    out.push_str(&adds(redis, settings, rounds)?);
    out.push_str(&format!(
        "\nThe machine's 1-minute load average (`/proc/loadavg`) at the suite's start and \
         end: {load_at_start} and {}, on {} cores (the suite's own Redis and worker are a \
         part of it; much more means other processes shared the CPU).\n\n",
        load_average(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    ));
    Ok(out)
}

/// The 1-minute load average, as `/proc/loadavg` gives it (`?` without it).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rows_run_what_they_say() {
        assert_eq!(SHAPES[SINGLE].args("5"), ["work", "bench-c100", "100", "5"]);
        assert_eq!(
            SHAPES[TARGET].args("5"),
            ["batch", "bench-batch", "100", "4", "5", "0"]
        );
        assert_eq!(SHAPES[TARGET].label(), "100 × 4");
        assert_eq!(SHAPES[BATCH_10].label(), "10 × 10");
        assert_eq!(SHAPES[5].label(), "100 × 4, 1 ms sleep a batch");
        assert_eq!(SHAPES[6].worker(), "raw engine, `WorkerOptions::batch`");
    }

    #[test]
    fn commands_are_listed_most_first_per_job() {
        let run = |calls: &[(&str, f64)]| Run {
            jobs_per_sec: 0.0,
            commands_per_job: 0.0,
            redis_us_per_job: 0.0,
            worker_us_per_job: 0.0,
            calls: calls.iter().map(|(n, c)| ((*n).to_owned(), *c)).collect(),
        };
        let runs = [
            run(&[("hset", 200.0), ("evalsha", 2.0), ("ping", 0.0)]),
            run(&[("hset", 200.0), ("xadd", 400.0), ("evalsha", 2.0)]),
        ];
        assert_eq!(by_command(&runs, 100), "hset 2.00, xadd 2.00, evalsha 0.02");
    }
}
