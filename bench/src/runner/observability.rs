//! Metrics and traces on against off, ours and Node's: the same jobs on the same Redis,
//! processed by our `#[processor]` worker (the app's Prometheus metrics and a
//! `tracing-opentelemetry` layer) and by Node BullMQ 6 (`bullmq-otel` 2), each over
//! its OpenTelemetry SDK's batch processor with an exporter that counts and drops. A
//! no-op handler, one that waits 1 ms as a real job's I/O call would, and one that does
//! 1 ms of CPU work (the same checksum loop in both, sized to 1 ms on this machine by
//! `calibrate`). The raw engine's worker runs the same handlers beside them (its spread
//! tells the runtime's from the wrapper's). The five modes run back to back in every
//! round, in an order that rotates; on/off is each round's own ratio, summarised over
//! many short rounds (`BENCH_PAIRED_ROUNDS`), since the machine's speed drifts between
//! rounds by more than the few per cent the targets are about.

use std::collections::BTreeMap;

use super::calibrate::calibrate;
use super::redis::BenchRedis;
use super::stats::{median, paired};
use super::suites::field;
use super::systems::{node_script, run_to_json, System};
use super::{rotated, Settings};
use crate::probe::CpuWork;
use crate::BenchResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Ours,
    Node,
    /// The raw engine's worker with the same handler: what the runtime and the engine
    /// do with it, without our wrapper (off only).
    Raw,
}

#[derive(Debug, Clone, Copy)]
struct Mode {
    side: Side,
    on: bool,
}

/// Indexed as [`OURS_OFF`], [`OURS_ON`], [`NODE_OFF`], [`NODE_ON`], [`RAW`].
const MODES: [Mode; 5] = [
    Mode {
        side: Side::Ours,
        on: false,
    },
    Mode {
        side: Side::Ours,
        on: true,
    },
    Mode {
        side: Side::Node,
        on: false,
    },
    Mode {
        side: Side::Node,
        on: true,
    },
    Mode {
        side: Side::Raw,
        on: false,
    },
];
const OURS_OFF: usize = 0;
const OURS_ON: usize = 1;
const NODE_OFF: usize = 2;
const NODE_ON: usize = 3;
const RAW: usize = 4;

/// A handler: its label, the queue prefix our probe registers it on (`<prefix><c>`),
/// what Node's probe calls it, and the jobs of a run at concurrency 1, 10 and 100 (at
/// most `BENCH_JOBS`): about a second of the slowest mode's (Node on) work on the 2-core
/// bench VM, so that a round of all nine rows, five modes each, takes about a minute,
/// half of it the processes' start-up and the pre-fill. The raw probe picks its handler
/// by these prefixes too (`probe/raw.rs`, `Handler::of`).
const HANDLERS: [(&str, &str, &str, [u64; 3]); 3] = [
    ("no-op", "bench-c", "noop", [1_500, 3_000, 4_000]),
    ("waits 1 ms", "bench-w", "1ms", [400, 2_000, 4_000]),
    ("1 ms of CPU", "bench-p", "cpu1ms", [600, 1_000, 1_000]),
];
const CONCURRENCIES: [u32; 3] = [1, 10, 100];

/// What one run measured.
struct Run {
    rate: f64,
    spans_per_job: f64,
    cpu_us_per_job: f64,
}

fn run_once(
    redis: &BenchRedis,
    mode: Mode,
    queue: &str,
    handler: &str,
    concurrency: u32,
    n: u64,
    cpu: CpuWork,
) -> BenchResult<Run> {
    let (c, n_arg) = (concurrency.to_string(), n.to_string());
    let result = match mode.side {
        Side::Ours => {
            let mut args = vec!["work", queue, c.as_str(), n_arg.as_str()];
            if mode.on {
                args.push("observed");
            }
            System::Ours.run_env(&redis.url(), &args, &cpu.env())?
        }
        Side::Raw => System::Raw.run_env(
            &redis.url(),
            &["work", queue, c.as_str(), n_arg.as_str()],
            &cpu.env(),
        )?,
        Side::Node => {
            let mut node = node_script("observed.mjs");
            node.args(["work", queue, &c, &n_arg])
                .arg(if mode.on { "on" } else { "off" })
                .arg(handler)
                .env("REDIS_URL", redis.url())
                .envs(cpu.env());
            run_to_json(node, "Node BullMQ 6 observed.mjs")?
        }
    };
    Ok(Run {
        rate: n as f64 / field(&result, "ms")? * 1000.0,
        spans_per_job: field(&result, "spans")? / n as f64,
        cpu_us_per_job: field(&result, "cpuMs")? * 1000.0 / n as f64,
    })
}

/// Per mode, one figure per round, in round order (so that round `i` pairs up).
type Rounds = [Vec<f64>; 5];

pub(super) fn measure(redis: &mut BenchRedis, settings: Settings) -> BenchResult<String> {
    let calibrated = calibrate();
    eprintln!("observability: {calibrated:?}");
    let rounds = settings.paired_rounds;
    let mut out = format!(
        "### Metrics and traces on against off, ours and Node BullMQ's (jobs/s, median of {rounds} paired rounds)\n\n\
         Ours on: the app's Prometheus `Metrics` and a `tracing-opentelemetry` layer (its \
         defaults) over the OpenTelemetry SDK's batch processor. Node on: BullMQ 6 with \
         `bullmq-otel` 2 (`enableMetrics`, no meter provider) over the JS SDK's batch \
         processor. Both exporters count the spans and drop them. Every trace recorded. \
         The five modes of a round (ours and Node's, off and on, and the raw engine's, below) run back to back, in an order that rotates; on/off is \
         the median of the rounds' own on/off, with their interquartile range. {}\n\n\
         | handler | concurrency | jobs | ours off | ours on | ours on/off | Node off | Node on | Node on/off | spans per job (ours / Node) |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
        calibrated.describe()
    );
    let mut cpu_rows = String::new();
    let mut raw_rows = String::new();
    for (label, prefix, node_handler, sizes) in HANDLERS {
        for (concurrency, size) in CONCURRENCIES.into_iter().zip(sizes) {
            let queue = format!("{prefix}{concurrency}");
            let n = size.min(settings.jobs);
            let mut rates: Rounds = Default::default();
            let mut cpu: Rounds = Default::default();
            let mut spans: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
            let indexed: Vec<(usize, Mode)> = MODES.into_iter().enumerate().collect();
            for round in 0..rounds {
                for (index, mode) in rotated(&indexed, round) {
                    redis.flush()?;
                    System::Raw.run(&redis.url(), &["enqueue", &queue, "bulk", &n.to_string()])?;
                    let run = run_once(
                        redis,
                        mode,
                        &queue,
                        node_handler,
                        concurrency,
                        n,
                        calibrated.work,
                    )?;
                    rates[index].push(run.rate);
                    cpu[index].push(run.cpu_us_per_job);
                    if mode.on {
                        let side = if mode.side == Side::Ours {
                            "ours"
                        } else {
                            "node"
                        };
                        spans.entry(side).or_default().push(run.spans_per_job);
                    }
                }
            }
            eprintln!("observability {label} c{concurrency}: {rates:?} cpu {cpu:?}");
            let m = |i: usize| median(&rates[i]);
            let spans_of = |side| spans.get(side).map_or(f64::NAN, |v| median(v));
            out.push_str(&format!(
                "| {label} | {concurrency} | {n} | {:.0} | {:.0} | {} | {:.0} | {:.0} | {} | {:.2} / {:.2} |\n",
                m(OURS_OFF),
                m(OURS_ON),
                paired(&rates[OURS_ON], &rates[OURS_OFF]),
                m(NODE_OFF),
                m(NODE_ON),
                paired(&rates[NODE_ON], &rates[NODE_OFF]),
                spans_of("ours"),
                spans_of("node"),
            ));
            let fast = FastRounds::of(&[&rates[OURS_OFF], &rates[OURS_ON], &rates[RAW]]);
            raw_rows.push_str(&format!(
                "| {label} | {concurrency} | {} | {} | {} | {} | {} | {:.1} / {:.1} |\n",
                Spread::of(&rates[OURS_OFF]),
                Spread::of(&rates[OURS_ON]),
                Spread::of(&rates[RAW]),
                paired(&rates[OURS_OFF], &rates[RAW]),
                fast,
                median(&cpu[OURS_OFF]),
                median(&cpu[RAW]),
            ));
            let c = |i: usize| median(&cpu[i]);
            cpu_rows.push_str(&format!(
                "| {label} | {concurrency} | {:.1} | {:.1} | {:+.1} | {} | {:.1} | {:.1} | {:+.1} | {} |\n",
                c(OURS_OFF),
                c(OURS_ON),
                c(OURS_ON) - c(OURS_OFF),
                paired(&cpu[OURS_OFF], &cpu[OURS_ON]),
                c(NODE_OFF),
                c(NODE_ON),
                c(NODE_ON) - c(NODE_OFF),
                paired(&cpu[NODE_OFF], &cpu[NODE_ON]),
            ));
        }
    }
    out.push_str(
        "\nThe worker process's CPU time per job (µs, median of the rounds), from the first \
         handler start to the last completion: what on adds (the difference of the \
         medians), and off/on, paired by round as above (the throughput a worker would \
         keep if its CPU were the limit).\n\n\
         | handler | concurrency | ours off | ours on | ours, on adds | ours off/on | Node off | Node on | Node, on adds | Node off/on |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    out.push_str(&cpu_rows);
    out.push_str(
        "\nThe raw engine's worker with the same handlers, in the same rounds (jobs/s: the \
         median, and the slowest and fastest round): where the rounds of a row fall in two \
         modes for ours and raw alike, the spread is the runtime's and the engine's, not \
         the wrapper's or the metrics' and traces'. Then ours off against raw, paired by \
         round; the rounds of each above the midpoint of the row's slowest and fastest \
         (ours off / ours on / raw); and the worker's CPU per job (µs, median), ours off \
         and raw, which the mode a round falls in does not change.\n\n\
         | handler | concurrency | ours off | ours on | raw engine | ours off/raw | fast rounds | CPU per job, ours off / raw |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    out.push_str(&raw_rows);
    out.push('\n');
    Ok(out)
}

/// How many rounds of each mode ran above the midpoint of the slowest and the fastest
/// round of them all: `5 / 3 / 3`. Where a row is bimodal, this counts each mode's rounds
/// in the fast mode.
struct FastRounds(Vec<usize>);

impl FastRounds {
    fn of(modes: &[&Vec<f64>]) -> Self {
        let all: Vec<f64> = modes
            .iter()
            .flat_map(|rounds| rounds.iter().copied())
            .collect();
        let range = Spread::of(&all);
        let midpoint = (range.lowest + range.highest) / 2.0;
        FastRounds(
            modes
                .iter()
                .map(|rounds| rounds.iter().filter(|&&v| v > midpoint).count())
                .collect(),
        )
    }
}

impl std::fmt::Display for FastRounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let counts: Vec<String> = self.0.iter().map(usize::to_string).collect();
        f.write_str(&counts.join(" / "))
    }
}

/// A row's rounds: their median and range.
struct Spread {
    median: f64,
    lowest: f64,
    highest: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Self {
        let (lowest, highest) = values
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), &v| {
                (low.min(v), high.max(v))
            });
        Spread {
            median: median(values),
            lowest,
            highest,
        }
    }
}

/// `1780 (962 to 1797)`.
impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.0} ({:.0} to {:.0})",
            self.median, self.lowest, self.highest
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{FastRounds, Spread};

    #[test]
    fn fast_rounds_are_counted_against_the_whole_rows_midpoint() {
        // Two modes, about 1,000 and 1,800 jobs/s; the midpoint is 1,400.
        let ours_off = vec![1_000.0, 1_790.0, 1_810.0, 1_050.0];
        let ours_on = vec![990.0, 1_020.0, 1_750.0, 1_000.0];
        let raw = vec![1_800.0, 1_760.0, 1_780.0, 1_300.0];
        let fast = FastRounds::of(&[&ours_off, &ours_on, &raw]);
        assert_eq!(fast.to_string(), "2 / 1 / 3");
        assert_eq!(Spread::of(&raw).to_string(), "1770 (1300 to 1800)");
    }
}
