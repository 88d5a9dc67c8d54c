//! The measured side: one command in a child process, one JSON line out.

mod observed;
mod ours;
mod raw;
pub(crate) mod scenarios;
mod spread;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::BenchResult;

/// The payload every system sends: a small email, as in the HTTP suite.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Email {
    pub(crate) to: String,
    pub(crate) subject: String,
}

impl Email {
    pub(crate) fn numbered(n: u64) -> Self {
        Email {
            to: format!("user{n}@example.com"),
            subject: format!("welcome {n}"),
        }
    }
}

/// The `n` payloads of a `bulk` run, `make(0)` to `make(n - 1)`, in batches of [`BULK`].
pub(crate) fn batches<T>(n: u64, make: impl Fn(u64) -> T + Copy) -> impl Iterator<Item = Vec<T>> {
    chunks(n, BULK, make)
}

/// `make(0)` to `make(n - 1)` in chunks of `size` (the last one shorter).
pub(crate) fn chunks<T>(
    n: u64,
    size: usize,
    make: impl Fn(u64) -> T + Copy,
) -> impl Iterator<Item = Vec<T>> {
    let size = size.max(1);
    (0..n)
        .step_by(size)
        .map(move |start| (start..(start + size as u64).min(n)).map(make).collect())
}

/// The encryption suite's payload (`runner/encryption.rs`, issue #47): about 1 KB of
/// JSON, a letter's text and a few fields ([`Letter::JSON_BYTES`], give or take the
/// digits of its number).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Letter {
    pub(crate) id: u64,
    pub(crate) to: String,
    pub(crate) subject: String,
    pub(crate) locale: String,
    pub(crate) body: String,
}

impl Letter {
    /// The size of a letter's JSON with a 5-digit number.
    pub(crate) const JSON_BYTES: usize = 1024;
    /// The body's length: the JSON's, less the other fields' (109 bytes at 5 digits).
    pub(crate) const BODY_BYTES: usize = Self::JSON_BYTES - 109;
    /// The environment variable that sets another body length: the encryption suite's
    /// control, a plain letter as long as a sealed one.
    pub(crate) const BODY_BYTES_VAR: &'static str = "BENCH_LETTER_BODY_BYTES";

    pub(crate) fn numbered(n: u64) -> Self {
        static BODY: OnceLock<String> = OnceLock::new();
        let body = BODY.get_or_init(|| {
            let sentence = "Thank you for your order. Your parcel left our warehouse this \
                            morning and should reach you within three working days. ";
            let len = std::env::var(Self::BODY_BYTES_VAR)
                .ok()
                .and_then(|len| len.parse().ok())
                .unwrap_or(Self::BODY_BYTES);
            sentence.chars().cycle().take(len).collect()
        });
        Letter {
            id: n,
            to: format!("user{n}@example.com"),
            subject: format!("Your order {n} has shipped"),
            locale: "en-GB".to_owned(),
            body: body.clone(),
        }
    }
}

/// A latency probe's payload: when it was added, on this process's clock.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Stamp {
    pub(crate) sent_us: u64,
}

/// Microseconds on a clock shared by the producer and the handler of one process.
pub(crate) fn now_us() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    u64::try_from(BASE.get_or_init(Instant::now).elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// The CPU handler's work: FNV-1a (32 bits) over a 4 KiB buffer, `passes` times, each
/// pass going on from the last one's hash. A chain of multiplies the compiler cannot
/// shorten, so it costs Rust and V8 about the same; Node's peer (`bench/node/observed.mjs`,
/// `cpu1ms`) runs the very same loop and must get the same checksum.
pub(crate) fn checksum(passes: u32) -> u32 {
    let buffer: [u8; 4096] = std::array::from_fn(|i| (i * 31 + 7) as u8);
    let mut hash: u32 = 0x811c_9dc5;
    for _ in 0..std::hint::black_box(passes) {
        for &byte in std::hint::black_box(&buffer) {
            hash ^= u32::from(byte);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    }
    std::hint::black_box(hash)
}

/// How much work the CPU handler does per job, and the checksum it must come to. The
/// runner sizes `passes` to 1 ms on the machine it runs on (`runner/calibrate.rs`) and
/// hands both to our probe and Node's in `BENCH_CPU_PASSES` and `BENCH_CPU_CHECKSUM`, so
/// each handler proves that it did the runner's work. Without them (a probe run by hand):
/// [`CpuWork::DEFAULT_PASSES`], its checksum computed here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CpuWork {
    pub(crate) passes: u32,
    pub(crate) checksum: u32,
}

impl CpuWork {
    /// The size the loop had before calibration (sized to 0.9 ms on another machine).
    pub(crate) const DEFAULT_PASSES: u32 = 80;

    pub(crate) fn new(passes: u32) -> Self {
        CpuWork {
            passes,
            checksum: checksum(passes),
        }
    }

    /// The runner's (from the environment), read once per process.
    pub(crate) fn current() -> Self {
        static CURRENT: OnceLock<CpuWork> = OnceLock::new();
        *CURRENT.get_or_init(|| {
            let var = |name| std::env::var(name).ok().and_then(|v| v.parse::<u32>().ok());
            match (var("BENCH_CPU_PASSES"), var("BENCH_CPU_CHECKSUM")) {
                (Some(passes), Some(checksum)) => CpuWork { passes, checksum },
                _ => CpuWork::new(Self::DEFAULT_PASSES),
            }
        })
    }

    /// The environment for a probe that is to do this work.
    pub(crate) fn env(self) -> [(&'static str, String); 2] {
        [
            ("BENCH_CPU_PASSES", self.passes.to_string()),
            ("BENCH_CPU_CHECKSUM", self.checksum.to_string()),
        ]
    }
}

/// Handler starts in a `work` run, and when the first one came.
pub(crate) struct StartCounter {
    started: AtomicU64,
    first: OnceLock<Instant>,
    /// The process's CPU time at the first start, ms.
    first_cpu: OnceLock<f64>,
}

impl StartCounter {
    pub(crate) const fn new() -> Self {
        StartCounter {
            started: AtomicU64::new(0),
            first: OnceLock::new(),
            first_cpu: OnceLock::new(),
        }
    }

    pub(crate) fn mark(&self) {
        self.mark_many(1);
    }

    /// `jobs` handlers started at once: a batch's.
    pub(crate) fn mark_many(&self, jobs: usize) {
        self.first_cpu.get_or_init(cpu_ms);
        self.first.get_or_init(Instant::now);
        self.started.fetch_add(jobs as u64, Ordering::Relaxed);
    }

    fn started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }
}

/// The kernel's count of this process's peak resident memory (VmHWM), in KiB.
pub(crate) fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// CPU time this process has used so far (user + system), in milliseconds: the sum of
/// its threads' time on a CPU in `/proc/self/task/*/schedstat`, in nanoseconds. The
/// process's own `/proc/self/stat` counts 10 ms ticks, 2 % of a one-second run; the
/// per-thread sum leaves out threads that have exited, which a `work` run's runtime does
/// not have between its two readings. Falls back to the ticks without schedstat.
pub(crate) fn cpu_ms() -> f64 {
    let on_cpu_ns = |task: std::fs::DirEntry| -> Option<u64> {
        let schedstat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        schedstat.split_whitespace().next()?.parse().ok()
    };
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        let ns: Vec<u64> = tasks.filter_map(|t| on_cpu_ns(t.ok()?)).collect();
        if !ns.is_empty() {
            return ns.iter().sum::<u64>() as f64 / 1e6;
        }
    }
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which is in brackets and may hold spaces.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) * 10.0
}

pub(crate) fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// How a `work` run went: the time from the first handler start to the last job in the
/// completed set, and how many `ZCARD`s the timing loop sent (the command-count suite
/// takes them out: Node's worker counts its own completions and sends none).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timed {
    pub(crate) took: Duration,
    /// From the worker's creation (its connections included) to the last job: a slow
    /// link's figure, where a worker's start (filling its slots one fetch at a time,
    /// ours and Node's alike) is a part of the run the first start leaves out for Node,
    /// whose loop fetches for every slot before its first handler starts.
    pub(crate) cold: Duration,
    pub(crate) polls: u64,
    /// The process's CPU time over `took`, ms.
    pub(crate) cpu_ms: f64,
}

/// Waits until `started()` says `n` handlers have started and `n` jobs sit in `queue`'s
/// completed set, looking every millisecond; answers the `ZCARD`s it sent. Fails once
/// `limit` has passed without that.
pub(crate) async fn wait_until_completed(
    queue: &str,
    n: u64,
    started: impl Fn() -> u64,
    limit: Option<Duration>,
) -> BenchResult<u64> {
    let deadline = limit.map(|limit| Instant::now() + limit);
    let client = redis::Client::open(redis_url())?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let completed_key = format!("bull:{queue}:completed");
    let mut polls = 0;
    loop {
        if started() >= n {
            polls += 1;
            let done: u64 = redis::cmd("ZCARD")
                .arg(&completed_key)
                .query_async(&mut conn)
                .await?;
            if done >= n {
                return Ok(polls);
            }
        }
        if deadline.is_some_and(|deadline| Instant::now() > deadline) {
            return Err(format!("{queue}: {n} jobs not done in {limit:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Waits until `n` handlers have started and `n` jobs sit in the completed set; returns
/// the time from the first start to then. Both systems are timed by this one loop.
pub(crate) async fn time_until_completed(
    counter: &StartCounter,
    queue: &str,
    n: u64,
    created: Instant,
) -> BenchResult<Timed> {
    let polls = wait_until_completed(queue, n, || counter.started(), None).await?;
    let first = counter.first.get().copied().unwrap_or_else(Instant::now);
    let cpu = cpu_ms() - counter.first_cpu.get().copied().unwrap_or(0.0);
    Ok(Timed {
        took: first.elapsed(),
        cold: created.elapsed(),
        polls,
        cpu_ms: cpu,
    })
}

fn print(value: &serde_json::Value) {
    println!("{value}");
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn arg<T: std::str::FromStr>(args: &[String], index: usize, what: &str) -> BenchResult<T> {
    args.get(index)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| format!("argument {index} ({what}) is missing or malformed").into())
}

/// Runs one child command: `<command> <ours|raw> ...`.
pub(crate) fn run(args: &[String]) -> BenchResult<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let command: String = arg(args, 0, "command")?;
        let system: String = arg(args, 1, "system")?;
        let ours = match system.as_str() {
            "ours" => true,
            "raw" => false,
            other => return Err(format!("unknown system `{other}`: ours or raw").into()),
        };
        match command.as_str() {
            "enqueue" => {
                let (queue, mode, n): (String, String, u64) = (
                    arg(args, 2, "queue")?,
                    arg(args, 3, "mode")?,
                    arg(args, 4, "n")?,
                );
                let sealed = match args.get(5).map(String::as_str) {
                    None => false,
                    Some("sealed") if ours => true,
                    Some(other) => {
                        return Err(format!("`enqueue {system}` has no mode `{other}`").into())
                    }
                };
                // Ours also tells the CPU time of its adds (the encryption suite's).
                let (took, cpu_ms) = if ours {
                    let (took, cpu_ms) = ours::enqueue(&queue, &mode, n, sealed).await?;
                    (took, Some(cpu_ms))
                } else {
                    (raw::enqueue(&queue, &mode, n).await?, None)
                };
                print(&serde_json::json!({ "ms": millis(took), "cpuMs": cpu_ms }));
            }
            "work" => {
                let (queue, concurrency, n): (String, usize, u64) = (
                    arg(args, 2, "queue")?,
                    arg(args, 3, "concurrency")?,
                    arg(args, 4, "n")?,
                );
                // `observed`, `observed=<share of traces sampled>`, or `sealed`.
                let sealed = args.get(5).is_some_and(|mode| mode == "sealed");
                let observed = match args.get(5).map(String::as_str) {
                    None | Some("sealed") => None,
                    Some("observed") => Some(1.0),
                    Some(other) => Some(
                        other
                            .strip_prefix("observed=")
                            .and_then(|share| share.parse::<f64>().ok())
                            .ok_or_else(|| format!("`{other}`: observed or observed=<0..1>"))?,
                    ),
                };
                let (timed, spans) = match (ours, observed) {
                    (true, observed) => ours::work(&queue, n, observed, sealed).await?,
                    (false, None) if !sealed => (raw::work(&queue, concurrency, n).await?, 0),
                    (false, _) => return Err("only ours can be observed or sealed".into()),
                };
                print(&serde_json::json!({
                    "ms": millis(timed.took),
                    "coldMs": millis(timed.cold),
                    "polls": timed.polls,
                    "peakRssKb": peak_rss_kb(),
                    "cpuMs": timed.cpu_ms,
                    "spans": spans,
                }));
            }
            "batch" => {
                let (queue, size, concurrency, n): (String, usize, usize, u64) = (
                    arg(args, 2, "queue")?,
                    arg(args, 3, "size")?,
                    arg(args, 4, "concurrency")?,
                    arg(args, 5, "n")?,
                );
                // A handler's time per batch, ms (0: a no-op).
                let sleep_ms: u64 = match args.get(6) {
                    None => 0,
                    Some(_) => arg(args, 6, "sleep_ms")?,
                };
                let batching = Batching {
                    size,
                    concurrency,
                    sleep: Duration::from_millis(sleep_ms),
                };
                let timed = if ours {
                    ours::batch_work(&queue, batching, n).await?
                } else {
                    raw::batch_work(&queue, batching, n).await?
                };
                print(&serde_json::json!({
                    "ms": millis(timed.took),
                    "polls": timed.polls,
                    "peakRssKb": peak_rss_kb(),
                    "cpuMs": timed.cpu_ms,
                }));
            }
            "latency" => {
                let (queue, n): (String, u64) = (arg(args, 2, "queue")?, arg(args, 3, "n")?);
                let samples = if ours {
                    ours::latency(&queue, n).await?
                } else {
                    raw::latency(&queue, n).await?
                };
                print(&serde_json::json!({ "samplesUs": samples }));
            }
            "scenario" => {
                let name: String = arg(args, 2, "scenario")?;
                let scenario = scenarios::Scenario::named(&name)
                    .ok_or_else(|| format!("no scenario `{name}`"))?;
                let window = if ours {
                    ours::scenario(scenario).await?
                } else {
                    raw::scenario(scenario).await?
                };
                print(&serde_json::json!({ "ms": millis(window), "timed": scenario.timed }));
            }
            "spread" => {
                let (target, queues, concurrency, n): (String, String, usize, u64) = (
                    arg(args, 2, "target")?,
                    arg(args, 3, "queues")?,
                    arg(args, 4, "concurrency")?,
                    arg(args, 5, "n")?,
                );
                if !ours {
                    return Err("spread runs ours only".into());
                }
                let queues: Vec<String> = queues.split(',').map(str::to_owned).collect();
                let took = spread::run(&target, &queues, concurrency, n).await?;
                print(&serde_json::json!({ "ms": millis(took) }));
            }
            "serve" => {
                let port: u16 = arg(args, 2, "port")?;
                // A mode the system does not have is refused: a typo must not measure
                // another server under the name of the one asked for.
                match (ours, args.get(3).map(String::as_str)) {
                    (true, None) => ours::serve(port, true).await?,
                    (true, Some("no-traces")) => ours::serve(port, false).await?,
                    (false, None) => raw::serve(port, false).await?,
                    (false, Some("traced")) => raw::serve(port, true).await?,
                    (_, Some(other)) => {
                        return Err(format!("`serve {system}` has no mode `{other}`").into())
                    }
                }
            }
            other => return Err(format!("unknown command `{other}`").into()),
        }
        Ok(())
    })
}

/// A batch worker's shape (`batch` runs, the batches suite's, issue #46).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batching {
    /// The most jobs a batch holds.
    pub(crate) size: usize,
    /// Batches at once.
    pub(crate) concurrency: usize,
    /// How long the handler waits per batch (a tokio sleep; zero: a no-op handler).
    pub(crate) sleep: Duration,
}

impl Batching {
    /// How long a batch that is not full waits for more jobs, ms. A `batch` run's
    /// jobs all wait before it starts, so every batch but the last fills at once: the
    /// wait is reached at most once, at the end, when the jobs are not a whole number of
    /// batches.
    pub(crate) const WAIT_MS: u64 = 20;
}

/// How many adds `inflight` keeps going at once.
pub(crate) const IN_FLIGHT: usize = 100;
/// The batch size of `bulk`.
pub(crate) const BULK: usize = 1_000;
/// The batch size of `bulk100` (ours only: the batches suite's add side).
pub(crate) const BULK_SMALL: usize = 100;

#[cfg(test)]
mod tests {
    use super::{checksum, CpuWork};

    #[test]
    fn the_cpu_handler_computes_the_checksum_nodes_peer_checks() {
        // bench/node/observed.mjs's comment quotes this one, for its default pass count.
        assert_eq!(checksum(CpuWork::DEFAULT_PASSES), 0x45a8_9dc5);
        assert_eq!(checksum(1), CpuWork::new(1).checksum);
        assert_ne!(checksum(1), checksum(2));
    }

    #[test]
    fn a_letter_is_a_kilobyte_of_json() {
        let json = |n| {
            serde_json::to_vec(&super::Letter::numbered(n))
                .unwrap()
                .len()
        };
        assert_eq!(json(12_345), super::Letter::JSON_BYTES);
        assert_eq!(json(0), super::Letter::JSON_BYTES - 12);
    }

    #[test]
    fn cpu_time_counts_this_process_work() {
        let before = super::cpu_ms();
        let until = std::time::Instant::now() + std::time::Duration::from_millis(30);
        while std::time::Instant::now() < until {
            std::hint::black_box(checksum(1));
        }
        let spent = super::cpu_ms() - before;
        assert!(spent > 5.0 && spent < 1_000.0, "{spent} ms");
    }
}
