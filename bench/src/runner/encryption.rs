//! Sealed payloads on against off (#47): ours with 1 KB payloads on a queue that seals
//! them (AES-256-GCM envelopes under a one-key keyring) and on one that does not, in the
//! same run. `add` one at a time and 100 in flight, and a handler that reads the letter
//! and returns a small receipt at concurrency 10 and 100, each of its own pre-filled jobs;
//! and what a job takes in Redis. Plain and sealed run back to back in every round, in
//! turn first; sealed/plain is the median of the rounds' own ratios with their
//! interquartile range (`BENCH_PAIRED_ROUNDS`), as in the observability suite, since the
//! machine's speed drifts between rounds by more than the 5 % the target allows.
//!
//! A third run per round is the control: plain letters padded to a sealed letter's
//! length. Against plain, it tells what the bytes alone cost (Redis reads, copies and
//! stores a third more per job), apart from the sealing's CPU.

use super::redis::BenchRedis;
use super::stats::{median, paired};
use super::suites::field;
use super::systems::System;
use super::{rotated, Settings};
use crate::probe::Letter;
use crate::BenchResult;

/// The target: sealed keeps at least this share of plain's throughput.
const TARGET: f64 = 0.95;
/// The queue of the `add` rows; the probe adds 1 KB letters to any `bench-1k-` queue.
const ADD_QUEUE: &str = "bench-1k-add";
/// Jobs whose hashes are measured per run.
const SAMPLE: usize = 100;

/// What a row measures.
#[derive(Debug, Clone, Copy)]
enum Row {
    /// `add`, the probe's mode: `single` (one at a time) or `inflight` (100 at once).
    Add(&'static str),
    /// The letter handler at this concurrency, on the probe's `bench-1k-c<c>` queue.
    Work(u32),
}

const ROWS: [Row; 4] = [
    Row::Add("single"),
    Row::Add("inflight"),
    Row::Work(10),
    Row::Work(100),
];

impl Row {
    fn label(self) -> String {
        match self {
            Row::Add("single") => "`add`, one at a time".to_owned(),
            Row::Add(_) => "`add`, 100 in flight".to_owned(),
            Row::Work(c) => format!("processing, concurrency {c}"),
        }
    }

    /// Jobs per run: `jobs`, a quarter of them for `add` one at a time (which is about a
    /// quarter as fast), so that each run takes about as long.
    fn jobs(self, jobs: u64) -> u64 {
        match self {
            Row::Add("single") => (jobs / 4).max(1),
            _ => jobs.max(1),
        }
    }
}

/// How a run's app treats its letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No keyring: letters in clear, about 1 KB of JSON.
    Plain,
    /// A keyring, and the queue sealed: the letters' envelopes.
    Sealed,
    /// The control: no keyring, letters padded to a sealed letter's length.
    PlainAsLong,
}

/// The modes, indexed by [`PLAIN`], [`SEALED`] and [`AS_LONG`].
const MODES: [Mode; 3] = [Mode::Plain, Mode::Sealed, Mode::PlainAsLong];
const PLAIN: usize = 0;
const SEALED: usize = 1;
const AS_LONG: usize = 2;

/// The JSON a sealed 1 KB letter's envelope adds to it: `{"sealed":"aes-256-gcm/1",
/// "key":"bench","nonce":"<16>","data":""}` (77 bytes) around the base64 of the letter
/// and its 16-byte tag.
fn sealed_len(plain: usize) -> usize {
    77 + (plain + 16).div_ceil(3) * 4
}

/// What a job takes in Redis, bytes (means over [`SAMPLE`] jobs, but `used_memory`).
#[derive(Debug, Clone, Copy)]
struct Bytes {
    /// The `data` field of a waiting job.
    data: f64,
    /// A waiting job's hash.
    waiting: f64,
    /// Redis's `used_memory` grown by a pre-fill, per job: the hash, the wait list's
    /// entry, the event stream's.
    used_memory: f64,
    /// The `returnvalue` field of a completed job.
    return_value: f64,
    /// A completed job's hash.
    completed: f64,
}

/// What one run measured.
#[derive(Debug, Clone, Copy)]
struct Run {
    rate: f64,
    /// The probe process's CPU time per job over its adds or its processing, µs.
    cpu_us: f64,
    /// Redis's CPU time per job over the child's run, µs.
    redis_us: f64,
    bytes: Option<Bytes>,
}

/// Runs our probe's `args` as `mode` asks (`sealed` last, or a longer letter) to the
/// end: its JSON, and Redis's CPU time over it per job of `n`, µs.
fn ours(
    redis: &mut BenchRedis,
    args: &[&str],
    mode: Mode,
    n: u64,
) -> BenchResult<(serde_json::Value, f64)> {
    let mut args = args.to_vec();
    let mut env = Vec::new();
    match mode {
        Mode::Plain => {}
        Mode::Sealed => args.push("sealed"),
        Mode::PlainAsLong => {
            let padding = sealed_len(Letter::JSON_BYTES) - Letter::JSON_BYTES;
            env.push((
                Letter::BODY_BYTES_VAR,
                (Letter::BODY_BYTES + padding).to_string(),
            ));
        }
    }
    let before = redis.cpu_seconds()?;
    let result = System::Ours.run_env(&redis.url(), &args, &env)?;
    let redis_us = (redis.cpu_seconds()? - before) * 1e6 / n as f64;
    Ok((result, redis_us))
}

fn run_once(redis: &mut BenchRedis, row: Row, mode: Mode, n: u64) -> BenchResult<Run> {
    redis.flush()?;
    let n_arg = n.to_string();
    let (result, redis_us, bytes) = match row {
        Row::Add(add) => {
            let (result, redis_us) = ours(redis, &["enqueue", ADD_QUEUE, add, &n_arg], mode, n)?;
            (result, redis_us, None)
        }
        Row::Work(concurrency) => {
            let queue = format!("bench-1k-c{concurrency}");
            let before = redis.used_memory()?;
            ours(redis, &["enqueue", &queue, "bulk", &n_arg], mode, n)?;
            let used_memory = redis.used_memory()?.saturating_sub(before) as f64 / n as f64;
            let (data, waiting) = redis.job_bytes(&queue, "wait", "data", SAMPLE)?;
            let c = concurrency.to_string();
            let (result, redis_us) = ours(redis, &["work", &queue, &c, &n_arg], mode, n)?;
            let (return_value, completed) =
                redis.job_bytes(&queue, "completed", "returnvalue", SAMPLE)?;
            let bytes = Bytes {
                data,
                waiting,
                used_memory,
                return_value,
                completed,
            };
            (result, redis_us, Some(bytes))
        }
    };
    Ok(Run {
        rate: n as f64 / field(&result, "ms")? * 1000.0,
        cpu_us: field(&result, "cpuMs")? * 1000.0 / n as f64,
        redis_us,
        bytes,
    })
}

/// Per mode, one run per round, in round order (so that round `i` pairs up).
type Rounds = [Vec<Run>; 3];

fn of(runs: &[Run], figure: impl Fn(&Run) -> f64) -> Vec<f64> {
    runs.iter().map(figure).collect()
}

pub(super) fn measure(redis: &mut BenchRedis, settings: Settings) -> BenchResult<String> {
    let rounds = settings.paired_rounds;
    let jobs = super::setting("BENCH_ENCRYPTION_JOBS", 10_000);
    let mut rows = String::new();
    let mut bytes: [Vec<Bytes>; 3] = Default::default();
    let mut verdicts = Vec::new();
    for row in ROWS {
        let n = row.jobs(jobs);
        let mut runs: Rounds = Default::default();
        let indexed: Vec<(usize, Mode)> = MODES.into_iter().enumerate().collect();
        for round in 0..rounds {
            for (index, mode) in rotated(&indexed, round) {
                let run = run_once(redis, row, mode, n)?;
                runs[index].push(run);
                bytes[index].extend(run.bytes);
            }
        }
        let rates = |i: usize| of(&runs[i], |r| r.rate);
        let cpu = |i: usize| median(&of(&runs[i], |r| r.cpu_us));
        let redis_cpu = |i: usize| median(&of(&runs[i], |r| r.redis_us));
        eprintln!(
            "encryption {}: plain {:?} sealed {:?} plain as long {:?}",
            row.label(),
            rates(PLAIN),
            rates(SEALED),
            rates(AS_LONG)
        );
        let ratio = paired(&rates(SEALED), &rates(PLAIN));
        let bytes_alone = paired(&rates(AS_LONG), &rates(PLAIN));
        // The throughput sealed would keep where CPU (the probe's and Redis's, on the
        // same cores) is the limit: plain's CPU per job over sealed's, paired by round.
        let total_cpu = |i: usize| of(&runs[i], |r| r.cpu_us + r.redis_us);
        let by_cpu = paired(&total_cpu(PLAIN), &total_cpu(SEALED));
        let met = ratio.median >= TARGET;
        verdicts.push((row, met));
        rows.push_str(&format!(
            "| {} | {n} | {:.0} | {:.0} | {ratio} | {} | {:.0} | {bytes_alone} | {:.1} / {:.1} | {:+.1} | {:.1} / {:.1} / {:.1} | {by_cpu} |\n",
            row.label(),
            median(&rates(PLAIN)),
            median(&rates(SEALED)),
            // Three decimals: a median of 0.948 shows as 0.95 above.
            if met {
                format!("yes ({:.3})", ratio.median)
            } else {
                format!("**no** ({:.3})", ratio.median)
            },
            median(&rates(AS_LONG)),
            cpu(PLAIN),
            cpu(SEALED),
            cpu(SEALED) - cpu(PLAIN),
            redis_cpu(PLAIN),
            redis_cpu(SEALED),
            redis_cpu(AS_LONG),
        ));
    }
    let missed: Vec<String> = verdicts
        .iter()
        .filter(|(_, met)| !met)
        .map(|(row, _)| row.label())
        .collect();
    let verdict = if missed.is_empty() {
        format!("The target (sealed/plain at least {TARGET}) is met in every row.")
    } else {
        format!(
            "The target (sealed/plain at least {TARGET}) is **not met** for: {}.",
            missed.join("; ")
        )
    };
    let mut out = format!(
        "### Sealed payloads on against off (#47): 1 KB jobs, ours (jobs/s, median of {rounds} paired rounds)\n\n\
         Each job's data is a letter of about {} bytes of JSON; the handler reads it and \
         returns a small receipt (`{{\"id\":..,\"chars\":..}}`). Sealed: the app has a \
         one-key keyring and seals the queue (`encrypt_queue`): data and return value are \
         AES-256-GCM envelopes. Plain: no keyring. The two run back to back in every round, \
         in turn first, each in its own process on a flushed Redis; processing runs start \
         from their own jobs, pre-filled with `add_bulk` by the same app (sealed or not). \
         sealed/plain is the median of the rounds' own ratios, with their interquartile \
         range. CPU per job: the probe process's, over its adds or from the first handler \
         start to the last completion (µs, median of the rounds), and what sealing adds \
         (the difference of the medians); Redis's over the child's run; and by CPU, the \
         share of plain's throughput sealed would keep where the two cores are the limit \
         (plain's CPU per job, probe's and Redis's, over sealed's, paired by round). \
         The control, plain as long as sealed: no keyring, each letter's body padded by \
         {} bytes to a sealed letter's length ({} bytes), a third run in every round; \
         against plain, what the bytes alone cost.\n\n\
         | what | jobs per run | plain | sealed | sealed/plain | at least {TARGET} | plain as long as sealed | as long/plain | CPU per job, plain / sealed | sealing adds | Redis CPU per job, plain / sealed / as long | by CPU, plain/sealed |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
        serde_json::to_vec(&Letter::numbered(12_345))?.len(),
        sealed_len(Letter::JSON_BYTES) - Letter::JSON_BYTES,
        sealed_len(Letter::JSON_BYTES),
    );
    out.push_str(&rows);
    out.push_str(&format!("\n{verdict}\n\n"));
    out.push_str(&bytes_table(&bytes, jobs));
    Ok(out)
}

/// One of [`Bytes`]' figures.
type Figure = fn(&Bytes) -> f64;

/// What a job takes in Redis, plain, sealed and the control: the medians over every
/// processing run.
fn bytes_table(bytes: &[Vec<Bytes>; 3], jobs: u64) -> String {
    let figures: [(&str, Figure); 5] = [
        ("`data` field (`HSTRLEN`)", |b| b.data),
        ("a waiting job's hash (`MEMORY USAGE`)", |b| b.waiting),
        (
            "`used_memory` per waiting job (grown by the pre-fill, / jobs)",
            |b| b.used_memory,
        ),
        ("`returnvalue` field of a completed job (`HSTRLEN`)", |b| {
            b.return_value
        }),
        (
            "a completed job's hash, with its return value (`MEMORY USAGE`)",
            |b| b.completed,
        ),
    ];
    let mut out = format!(
        "Bytes per job in Redis: medians over the processing runs' jobs ({SAMPLE} sampled per \
         run; `used_memory` over each pre-fill of {jobs}).\n\n\
         | per job | plain | sealed | sealed/plain | sealing adds | plain as long as sealed |\n|---|---|---|---|---|---|\n"
    );
    for (label, figure) in figures {
        let m = |i: usize| median(&bytes[i].iter().map(figure).collect::<Vec<_>>());
        out.push_str(&format!(
            "| {label} | {:.0} | {:.0} | {:.2} | {:+.0} | {:.0} |\n",
            m(PLAIN),
            m(SEALED),
            m(SEALED) / m(PLAIN),
            m(SEALED) - m(PLAIN),
            m(AS_LONG),
        ));
    }
    out.push('\n');
    out
}
