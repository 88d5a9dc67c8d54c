//! BullMQ's own four benchmark scenarios (taskforcesh/bullmq-bench; what each does and
//! how it is timed: `probe/scenarios.rs`), for ours, the raw engine and Node BullMQ 6,
//! so a reader can set our figures beside figures published with that suite.

use std::collections::BTreeMap;

use super::findings::Findings;
use super::redis::BenchRedis;
use super::stats::median;
use super::suites::{field, ratio};
use super::systems::System;
use super::{rotated, Settings};
use crate::probe::scenarios::SCENARIOS;
use crate::BenchResult;

/// The one public set of all four that we know of, as bullmq-bench prints them (each the
/// mean of 3 repeats): BullMQ 5.76.4 on Bun 1.2.2, Redis 8.6.2 in Docker, an 8-core
/// Apple M3, all on one host (jotarios/chasquimq, `benchmarks/baseline-bullmq.md`).
const PUBLISHED: [f64; 4] = [13_961.0, 60_828.0, 13_250.0, 47_707.0];

pub(super) fn measure(
    redis: &mut BenchRedis,
    settings: Settings,
    findings: &mut Findings,
) -> BenchResult<String> {
    let mut out = String::from(
        "### BullMQ's four scenarios (bullmq-bench; jobs/s, median of the rounds)\n\n\
         The timed jobs over the window from the warm-up's end to the last add answered or \
         the last job completed. bullmq-bench prints every job, warm-up included, over its \
         window: its figure is 2 times this for `queue-add` and `worker-generic`, 1.1 times \
         for the other two (the columns \"as printed\"). Published: the one public set of \
         all four we know, each the mean of 3 repeats (BullMQ 5.76.4 on Bun, 8-core Apple \
         M3, Redis 8.6 in Docker; jotarios/chasquimq, `benchmarks/baseline-bullmq.md`), as \
         printed; another machine, so set it beside the Node column, not ours.\n\n\
         | scenario | timed jobs | ours | raw engine | Node BullMQ 6 | ours/Node 6 | ours, as printed | Node 6, as printed | published, as printed |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let systems = System::ALL;
    let mut per_system: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    for (scenario, published) in SCENARIOS.into_iter().zip(PUBLISHED) {
        let mut rates: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
        for round in 0..settings.rounds {
            for system in rotated(&systems, round) {
                redis.flush()?;
                let result = system.run(&redis.url(), &["scenario", scenario.name])?;
                let rate = field(&result, "timed")? / field(&result, "ms")? * 1000.0;
                rates.entry(system.label()).or_default().push(rate);
            }
        }
        eprintln!("scenario {}: {rates:?}", scenario.name);
        let med = |system: System| rates.get(system.label()).map_or(f64::NAN, |v| median(v));
        for system in systems {
            per_system
                .entry(system.label())
                .or_default()
                .push(med(system));
        }
        let (ours, raw, node) = (med(System::Ours), med(System::Raw), med(System::Node));
        out.push_str(&format!(
            "| `{}` | {} | {ours:.0} | {raw:.0} | {node:.0} | {} | {:.0} | {:.0} | {published:.0} |\n",
            scenario.name,
            scenario.timed,
            ratio(ours, node),
            scenario.as_bullmq_bench_prints(ours),
            scenario.as_bullmq_bench_prints(node),
        ));
    }
    out.push('\n');
    let names: Vec<&'static str> = SCENARIOS.iter().map(|s| s.name).collect();
    findings.scenarios(
        &names,
        systems
            .iter()
            .map(|s| (s.label(), per_system.remove(s.label()).unwrap_or_default()))
            .collect(),
    );
    Ok(out)
}
