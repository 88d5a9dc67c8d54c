//! Redis commands per job, ours against the raw engine's and Node BullMQ's, for `add` and
//! for processing, as `INFO commandstats` counts them (commands a script runs count too,
//! under their own names). Each is measured at two sizes and the difference taken, so
//! that what a process does once (connecting, loading scripts, a worker's start-up and
//! its idle polls) drops out and what is left is the cost of one more job.

use std::collections::BTreeMap;

use super::redis::BenchRedis;
use super::suites::field;
use super::systems::System;
use crate::BenchResult;

/// Calls per command name since the last reset.
pub(super) type Calls = BTreeMap<String, f64>;

pub(super) fn calls(redis: &mut BenchRedis) -> BenchResult<Calls> {
    let info = redis.info("commandstats")?;
    Ok(info
        .lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats.split(',').find_map(|p| p.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse::<f64>().ok()?))
        })
        .collect())
}

/// `(big - small) / jobs` per command, leaving out those that round to nothing.
fn per_job(small: &Calls, big: &Calls, jobs: u64) -> Calls {
    big.iter()
        .map(|(name, b)| {
            let s = small.get(name).copied().unwrap_or(0.0);
            (name.clone(), (b - s) / jobs as f64)
        })
        .filter(|(_, v)| v.abs() >= 0.005)
        .collect()
}

/// Commands `system` sends to add `n` jobs one at a time.
fn add_calls(redis: &mut BenchRedis, system: System, n: u64) -> BenchResult<Calls> {
    redis.flush()?;
    redis.reset_stats()?;
    system.run(
        &redis.url(),
        &["enqueue", "bench-commands", "single", &n.to_string()],
    )?;
    let mut counted = calls(redis)?;
    // The bench's own reset and reading.
    counted.remove("config|resetstat");
    counted.remove("info");
    Ok(counted)
}

/// Commands `system`'s worker sends to process `n` waiting jobs at `concurrency`, less
/// the timing loop's polls.
fn process_calls(
    redis: &mut BenchRedis,
    system: System,
    concurrency: u32,
    n: u64,
) -> BenchResult<Calls> {
    redis.flush()?;
    let queue = format!("bench-c{concurrency}");
    System::Raw.run(&redis.url(), &["enqueue", &queue, "bulk", &n.to_string()])?;
    redis.reset_stats()?;
    let result = system.run(
        &redis.url(),
        &["work", &queue, &concurrency.to_string(), &n.to_string()],
    )?;
    let mut counted = calls(redis)?;
    counted.remove("config|resetstat");
    counted.remove("info");
    // Node's probe sends none (it counts completions itself); ours and raw's send these.
    let polls = result["polls"].as_f64().unwrap_or(0.0);
    if let Some(zcard) = counted.get_mut("zcard") {
        *zcard -= polls;
    }
    let _ = field(&result, "ms")?;
    Ok(counted)
}

fn describe(per_job: &Calls) -> (f64, String) {
    let total = per_job.values().sum();
    // Most calls first, by name among equals (as printed: to the hundredth).
    let hundredths = |v: f64| (v * 100.0).round() as i64;
    let mut named: Vec<(&String, &f64)> = per_job.iter().collect();
    named.sort_by(|a, b| hundredths(*b.1).cmp(&hundredths(*a.1)).then(a.0.cmp(b.0)));
    let list = named
        .iter()
        .map(|(name, v)| format!("{name} {v:.2}"))
        .collect::<Vec<_>>()
        .join(", ");
    (total, list)
}

const ADD_JOBS: u64 = 1_000;
const PROCESS_JOBS: u64 = 2_000;

pub(super) fn measure(redis: &mut BenchRedis) -> BenchResult<String> {
    let mut out = String::from(
        "### Redis commands per job (`INFO commandstats`)\n\n\
         The difference between runs of two sizes (n and 2n jobs), per job: what one more \
         job costs. Commands a BullMQ script runs count under their own names, the script \
         as one `evalsha`. Processing starts from jobs already waiting; the timing loop's \
         polls are taken out.\n\n\
         | operation | system | commands per job | by command |\n|---|---|---|---|\n",
    );
    let mut totals: BTreeMap<(String, &str), f64> = BTreeMap::new();
    let mut operations: Vec<String> = Vec::new();
    for system in System::ALL {
        let small = add_calls(redis, system, ADD_JOBS)?;
        let big = add_calls(redis, system, 2 * ADD_JOBS)?;
        let (total, list) = describe(&per_job(&small, &big, ADD_JOBS));
        let operation = "`add`, one at a time".to_owned();
        out.push_str(&format!(
            "| {operation} | {} | {total:.2} | {list} |\n",
            system.label()
        ));
        totals.insert((operation.clone(), system.label()), total);
        if !operations.contains(&operation) {
            operations.push(operation);
        }
    }
    for concurrency in [1u32, 10] {
        for system in System::ALL {
            let small = process_calls(redis, system, concurrency, PROCESS_JOBS)?;
            let big = process_calls(redis, system, concurrency, 2 * PROCESS_JOBS)?;
            let (total, list) = describe(&per_job(&small, &big, PROCESS_JOBS));
            let operation = format!("processing, concurrency {concurrency}");
            out.push_str(&format!(
                "| {operation} | {} | {total:.2} | {list} |\n",
                system.label()
            ));
            totals.insert((operation.clone(), system.label()), total);
            if !operations.contains(&operation) {
                operations.push(operation);
            }
        }
    }
    out.push_str("\nours/Node, commands per job: ");
    let ratios: Vec<String> = operations
        .iter()
        .map(|op| {
            let of = |s: System| totals.get(&(op.clone(), s.label())).copied();
            match (of(System::Ours), of(System::Node)) {
                (Some(ours), Some(node)) => format!("{op} {:.2}", ours / node),
                _ => format!("{op} ?"),
            }
        })
        .collect();
    out.push_str(&ratios.join("; "));
    out.push_str("\n\n");
    Ok(out)
}
