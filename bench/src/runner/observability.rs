//! Metrics and traces on against off, ours and Node's: the same jobs on the same Redis,
//! processed by our `#[processor]` worker (the app's Prometheus metrics and a
//! `tracing-opentelemetry` layer) and by Node BullMQ 6 (`bullmq-otel` 2), each over
//! its OpenTelemetry SDK's batch processor with an exporter that counts and drops. A
//! no-op handler, one that waits 1 ms as a real job's I/O call would, and one that does
//! about 1 ms of CPU work (the same checksum loop in both). The four modes rotate every
//! round; a round's on/off is a paired ratio.

use std::collections::BTreeMap;

use super::redis::BenchRedis;
use super::stats::median;
use super::suites::{field, ratio};
use super::systems::{node_script, run_to_json, System};
use super::{rotated, Settings};
use crate::BenchResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Ours,
    Node,
}

#[derive(Debug, Clone, Copy)]
struct Mode {
    side: Side,
    on: bool,
}

const MODES: [Mode; 4] = [
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
];

/// A handler: its label, the queue prefix our probe registers it on (`<prefix><c>`),
/// and what Node's probe calls it.
const HANDLERS: [(&str, &str, &str); 3] = [
    ("no-op", "bench-c", "noop"),
    ("waits 1 ms", "bench-w", "1ms"),
    ("1 ms of CPU", "bench-p", "cpu1ms"),
];

/// One run of `mode`: jobs/s, spans exported per job, and the worker's CPU µs per job.
fn run_once(
    redis: &BenchRedis,
    mode: Mode,
    queue: &str,
    handler: &str,
    concurrency: u32,
    n: u64,
) -> BenchResult<(f64, f64, f64)> {
    let (c, n_arg) = (concurrency.to_string(), n.to_string());
    let result = match mode.side {
        Side::Ours => {
            let mut args = vec!["work", queue, c.as_str(), n_arg.as_str()];
            if mode.on {
                args.push("observed");
            }
            System::Ours.run(&redis.url(), &args)?
        }
        Side::Node => {
            let mut node = node_script("observed.mjs");
            node.args(["work", queue, &c, &n_arg])
                .arg(if mode.on { "on" } else { "off" })
                .arg(handler)
                .env("REDIS_URL", redis.url());
            run_to_json(node, "Node BullMQ 6 observed.mjs")?
        }
    };
    let rate = n as f64 / field(&result, "ms")? * 1000.0;
    let cpu_us = field(&result, "cpuMs")? * 1000.0 / n as f64;
    Ok((rate, field(&result, "spans")? / n as f64, cpu_us))
}

/// Per mode (ours off, ours on, Node off, Node on), one figure per round.
type Rounds = [Vec<f64>; 4];

pub(super) fn measure(redis: &mut BenchRedis, settings: Settings) -> BenchResult<String> {
    let mut out = String::from(
        "### Metrics and traces on against off, ours and Node BullMQ's (jobs/s, median of the rounds)\n\n\
         Ours on: the app's Prometheus `Metrics` and a `tracing-opentelemetry` layer (its \
         defaults) over the OpenTelemetry SDK's batch processor. Node on: BullMQ 6 with \
         `bullmq-otel` 2 (`enableMetrics`, no meter provider) over the JS SDK's batch \
         processor. Both exporters count the spans and drop them. Every trace recorded. \
         In brackets: the lowest and highest paired on/off of a round.\n\n\
         | handler | concurrency | jobs | ours off | ours on | ours on/off | Node off | Node on | Node on/off | spans per job (ours / Node) |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut cpu_rows = String::new();
    for (label, prefix, node_handler) in HANDLERS {
        for concurrency in [1u32, 10, 100] {
            let queue = format!("{prefix}{concurrency}");
            // A waiting handler at concurrency 1 is slow: 2,000 jobs make seconds. A
            // CPU-bound one is as slow at any concurrency (two cores).
            let n = match node_handler {
                "noop" => settings.jobs,
                "cpu1ms" => settings.jobs.min(2_000),
                _ => settings.jobs.min(2_000 * u64::from(concurrency)),
            };
            let mut rates: Rounds = Default::default();
            let mut cpu: Rounds = Default::default();
            let mut spans: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
            let indexed: Vec<(usize, Mode)> = MODES.into_iter().enumerate().collect();
            for round in 0..settings.rounds {
                for (index, mode) in rotated(&indexed, round) {
                    redis.flush()?;
                    System::Raw.run(&redis.url(), &["enqueue", &queue, "bulk", &n.to_string()])?;
                    let (rate, per_job, cpu_us) =
                        run_once(redis, mode, &queue, node_handler, concurrency, n)?;
                    rates[index].push(rate);
                    cpu[index].push(cpu_us);
                    if mode.on {
                        let side = if mode.side == Side::Ours {
                            "ours"
                        } else {
                            "node"
                        };
                        spans.entry(side).or_default().push(per_job);
                    }
                }
            }
            eprintln!("observability {label} c{concurrency}: {rates:?}");
            let m = |i: usize| median(&rates[i]);
            let paired = |on: usize, off: usize| {
                let per_round: Vec<f64> = rates[on]
                    .iter()
                    .zip(&rates[off])
                    .map(|(on, off)| on / off)
                    .collect();
                let low = per_round.iter().copied().fold(f64::INFINITY, f64::min);
                let high = per_round.iter().copied().fold(0.0, f64::max);
                format!("**{}** ({low:.2} to {high:.2})", ratio(m(on), m(off)))
            };
            let spans_of = |side| spans.get(side).map_or(f64::NAN, |v| median(v));
            let c = |i: usize| median(&cpu[i]);
            cpu_rows.push_str(&format!(
                "| {label} | {concurrency} | {:.1} | {:.1} | +{:.1} ({}) | {:.1} | {:.1} | +{:.1} ({}) |\n",
                c(0),
                c(1),
                c(1) - c(0),
                ratio(c(0), c(1)),
                c(2),
                c(3),
                c(3) - c(2),
                ratio(c(2), c(3)),
            ));
            out.push_str(&format!(
                "| {label} | {concurrency} | {n} | {:.0} | {:.0} | {} | {:.0} | {:.0} | {} | {:.2} / {:.2} |\n",
                m(0),
                m(1),
                paired(1, 0),
                m(2),
                m(3),
                paired(3, 2),
                spans_of("ours"),
                spans_of("node"),
            ));
        }
    }
    out.push_str(
        "\nThe worker process's CPU time per job (µs, median of the rounds), from the first \
         handler start to the last completion: what on adds, and off/on (the throughput a \
         worker would keep if its CPU were the limit).\n\n\
         | handler | concurrency | ours off | ours on | ours, on adds | Node off | Node on | Node, on adds |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    out.push_str(&cpu_rows);
    out.push('\n');
    Ok(out)
}
