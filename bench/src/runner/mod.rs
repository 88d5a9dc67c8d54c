//! The orchestrator: one private Redis, every suite in alternating rounds (the order
//! of the systems rotates each round, so drift on a shared machine hits all of them),
//! and a Markdown report of medians and ratios on stdout, closed by the targets met or
//! not and the charts (SVG files, [`charts::directory`]).

mod batch_floor;
mod batches;
mod calibrate;
mod charts;
mod cluster;
mod commands;
mod dashboard;
mod dashboard_tabs;
mod encryption;
mod findings;
mod floor;
mod groups;
mod health;
mod http;
mod observability;
mod outbox;
mod redis;
mod results;
mod scenarios;
mod slowlink;
mod stats;
mod status;
mod suites;
mod systems;

use std::process::Command;

use crate::BenchResult;
use redis::BenchRedis;

/// Sizes of a run, from the environment.
#[derive(Debug, Clone, Copy)]
pub(super) struct Settings {
    /// `BENCH_ROUNDS` (default 3): rounds of every A/B/C comparison but the paired ones.
    rounds: usize,
    /// `BENCH_PAIRED_ROUNDS` (default 10): rounds of the comparisons the cost targets of
    /// issue #34 are ratios of (HTTP ours/raw, observability on/off, throughput ours/raw
    /// at concurrency 1), each summarised by the median of its rounds' own ratios. The
    /// machine's speed drifts by ±25 % between runs, so a 3 % difference needs many short
    /// rounds rather than a few long ones. With the defaults, the three suites take about
    /// 14 minutes on the 2-core bench VM (a round: about 60 s of observability, its five
    /// modes, 13 s of HTTP, 2 s of throughput; and 80 s for the throughput table's
    /// `BENCH_ROUNDS`). The encryption suite's sealed/plain (issue #47) is paired the same
    /// way, each run of `BENCH_ENCRYPTION_JOBS` (default 10000) jobs (a round: about 6 s).
    paired_rounds: usize,
    /// `BENCH_JOBS` (default 20000): pre-filled jobs per throughput run (and the most per
    /// observability run).
    jobs: u64,
    /// `BENCH_PAIRED_JOBS` (default 3000): jobs per run of the paired throughput
    /// comparison at concurrency 1 (about a second each).
    paired_jobs: u64,
    /// `BENCH_LATENCY_JOBS` (default 500): probes per latency run.
    latency_jobs: u64,
    /// `BENCH_HTTP_SECS` (default 4): length of each HTTP load, one per server per paired
    /// round. (`BENCH_SUITES`, a comma list of floor, enqueue, throughput, latency, http,
    /// results, outbox, status, health, observability, encryption, dashboard, groups,
    /// batches, slowlink, cluster, commands, footprint, scenarios, runs only those.)
    http_secs: u64,
}

pub(super) fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rounds_setting(name: &str, default: u64) -> usize {
    usize::try_from(setting(name, default)).unwrap_or(1).max(1)
}

impl Settings {
    fn from_env() -> Self {
        Settings {
            rounds: rounds_setting("BENCH_ROUNDS", 3),
            paired_rounds: rounds_setting("BENCH_PAIRED_ROUNDS", 10),
            jobs: setting("BENCH_JOBS", 20_000),
            paired_jobs: setting("BENCH_PAIRED_JOBS", 3_000),
            latency_jobs: setting("BENCH_LATENCY_JOBS", 500),
            http_secs: setting("BENCH_HTTP_SECS", 4),
        }
    }
}

/// The systems in the order round `round` runs them.
fn rotated<T: Copy>(items: &[T], round: usize) -> Vec<T> {
    let mut order = items.to_vec();
    if !order.is_empty() {
        let shift = round % order.len();
        order.rotate_left(shift);
    }
    order
}

fn command_output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "?".to_owned())
}

/// The version of `package` installed under `dir` (relative to the repository), as npm
/// put it there; `?` when it is not installed.
fn npm_version(dir: &str, package: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // A workspace member's packages may sit in the workspace's node_modules.
    let candidates = [
        root.join(dir)
            .join("node_modules")
            .join(package)
            .join("package.json"),
        root.join(dir)
            .join("../node_modules")
            .join(package)
            .join("package.json"),
    ];
    candidates
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok())
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|json| json["version"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "?".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cores} cores, {cpu}")
}

/// The programs a suite runs besides this binary (Node's peers need `npm ci` in
/// `bench/node` and `tests/node`, which `scripts/bench.sh` does).
fn programs_for(suite: &str) -> &'static [&'static str] {
    match suite {
        "floor" => &["redis-benchmark"],
        "http" => &["wrk", "node"],
        "enqueue" | "throughput" | "latency" | "observability" | "commands" | "footprint"
        | "slowlink" | "scenarios" => &["node"],
        _ => &[],
    }
}

/// The programs the chosen suites need and this machine lacks, checked before the first
/// suite starts: a missing one would otherwise end the run where it is first needed,
/// after the minutes of the suites before it.
fn missing_programs(wanted: impl Fn(&str) -> bool) -> Vec<&'static str> {
    not_installed(
        SUITES
            .iter()
            .filter(|suite| wanted(suite))
            .flat_map(|suite| programs_for(suite).iter().copied()),
    )
}

/// Those of `programs` that cannot be started, each once.
fn not_installed(programs: impl Iterator<Item = &'static str>) -> Vec<&'static str> {
    let mut missing: Vec<&'static str> = programs
        .filter(|program| Command::new(program).arg("--version").output().is_err())
        .collect();
    missing.sort_unstable();
    missing.dedup();
    missing
}

/// Every suite, in the order `run_all` runs them.
const SUITES: [&str; 19] = [
    "floor",
    "enqueue",
    "throughput",
    "scenarios",
    "observability",
    "encryption",
    "commands",
    "latency",
    "http",
    "results",
    "outbox",
    "status",
    "health",
    "dashboard",
    "groups",
    "batches",
    "cluster",
    "slowlink",
    "footprint",
];

fn chosen(suite: &str) -> bool {
    std::env::var("BENCH_SUITES").map_or(true, |list| list.split(',').any(|s| s.trim() == suite))
}

pub(crate) fn run_all() -> BenchResult<()> {
    let settings = Settings::from_env();
    let missing = missing_programs(chosen);
    if !missing.is_empty() {
        return Err(format!(
            "the chosen suites need {}, which this machine lacks: run scripts/bench.sh, \
             which installs them",
            missing.join(", ")
        )
        .into());
    }
    let mut redis = BenchRedis::start()?;
    eprintln!("bench Redis on port {}; {settings:?}", redis.port());

    // The report goes out a section at a time, as each suite ends: a suite that fails
    // leaves the sections before it on stdout.
    let emit = |section: String| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(section.as_bytes());
        let _ = out.flush();
    };
    emit(format!(
        "Run: {}; machine: {}; Redis {}; Node {}; {}; Node BullMQ {} and {}, NestJS {} with \
         `@nestjs/bullmq` {}, the observability suite's Node BullMQ {} with `bullmq-otel` {}; \
         {} rounds, {} jobs per throughput run; {} paired rounds\n\n",
        command_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        machine(),
        redis.version(),
        command_output("node", &["--version"]),
        command_output("rustc", &["--version"]),
        npm_version("bench/node", "bullmq"),
        npm_version("bench/node", "bullmq5"),
        npm_version("bench/nestjs", "@nestjs/core"),
        npm_version("bench/nestjs", "@nestjs/bullmq"),
        npm_version("tests/node/bullmq6", "bullmq"),
        npm_version("tests/node/bullmq6", "bullmq-otel"),
        settings.rounds,
        settings.jobs,
        settings.paired_rounds,
    ));
    // Progress on stderr: when each suite starts, so that its length shows.
    let started = std::time::Instant::now();
    // The processes' memory the throughput suite measured, for the footprint's table.
    let mut rss = suites::Rss::new();
    let mut findings = findings::Findings::default();
    for suite in SUITES.into_iter().filter(|suite| chosen(suite)) {
        eprintln!("== {suite}, at {:.0} s", started.elapsed().as_secs_f64());
        let section = match suite {
            "floor" => floor::measure(&mut redis)?,
            "enqueue" => suites::enqueue(&mut redis, settings, &mut findings)?,
            "throughput" => {
                let (throughput, measured) =
                    suites::throughput(&mut redis, settings, &mut findings)?;
                rss = measured;
                throughput
            }
            "scenarios" => scenarios::measure(&mut redis, settings, &mut findings)?,
            "observability" => observability::measure(&mut redis, settings)?,
            "encryption" => encryption::measure(&mut redis, settings)?,
            "commands" => commands::measure(&mut redis)?,
            "latency" => suites::latency(&mut redis, settings, &mut findings)?,
            "http" => http::measure(&mut redis, settings, &mut findings)?,
            "results" => results::measure(&mut redis)?,
            "outbox" => outbox::measure(&mut redis, settings)?,
            "status" => status::measure(&mut redis)?,
            "health" => health::measure(&mut redis, settings)?,
            "dashboard" => dashboard::measure(&mut redis)?,
            "groups" => groups::measure(&mut redis, settings)?,
            "batches" => batches::measure(&mut redis, settings, &mut findings)?,
            "cluster" => cluster::measure(&mut redis, settings)?,
            "slowlink" => slowlink::measure(&mut redis, settings)?,
            "footprint" => suites::footprint(&mut redis, &rss, &mut findings)?,
            other => return Err(format!("no suite `{other}`").into()),
        };
        emit(section);
    }
    emit(findings.targets_table());
    emit(chart_links(&findings)?);
    eprintln!("== done, at {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Writes the run's charts and answers the report's lines that show them.
fn chart_links(findings: &findings::Findings) -> BenchResult<String> {
    let charts = findings.charts();
    if charts.is_empty() {
        return Ok(String::new());
    }
    let dir = charts::directory();
    let written = charts::write_all(&dir, &charts)?;
    eprintln!("charts: {}", dir.display());
    // Paths as the report's reader finds them: from the current directory (the
    // repository's root, where scripts/bench.sh runs this), else as they are.
    let here = std::env::current_dir().unwrap_or_default();
    let mut out = String::from("### Charts\n\n");
    for (chart, path) in written {
        let shown = path.strip_prefix(&here).unwrap_or(&path);
        out.push_str(&format!("![{}]({})\n\n", chart.title, shown.display()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_that_cannot_start_is_named_once() {
        let missing = not_installed(
            [
                "sh",
                "queue-bench-no-such-program",
                "queue-bench-no-such-program",
            ]
            .into_iter(),
        );
        assert_eq!(missing, ["queue-bench-no-such-program"]);
    }
}
