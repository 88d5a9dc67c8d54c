//! The HTTP suite: `POST /enqueue` answered 202 under wrk, ours (traces started, and
//! not) against a bare axum endpoint over the raw engine; with the CPU each process
//! spent per request, which says where a difference in requests/s went. Many short
//! rounds (`BENCH_PAIRED_ROUNDS` of `BENCH_HTTP_SECS`), each running the servers
//! back to back, and ours/raw as the median of the rounds' own ratios: the machine's
//! speed drifts between rounds by more than the 10 % the target is about.
//!
//! The default endpoint runs twice: on Redis's defaults, and on the setting
//! `docs/operations.md` recommends for traced jobs (`hash-max-listpack-value 128`), which
//! tells what the trace costs Redis: its 55-character context makes a job's options
//! longer than the 64 bytes a hash may hold a value in before Redis stores it as a
//! hashtable. An untraced job's options are far below either limit.
//!
//! The bare endpoint runs twice too: as it is, the baseline, and adding each job with a
//! new trace context in BullMQ's telemetry field, the least a traced job costs any
//! producer. That splits ours' distance from the baseline into the trace's own share and
//! ours'.
//!
//! And the stack our users come from: a NestJS 11 app with `@nestjs/bullmq` over Node
//! BullMQ 6 (`bench/nestjs`, pinned by its lock file) answering the same route, as its
//! guide writes it.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use super::findings::{Findings, Wanted};
use super::redis::{free_port, BenchRedis};
use super::stats::{median, paired};
use super::suites::ratio;
use super::systems::System;
use super::{rotated, Settings};
use crate::BenchResult;

/// Per server, one figure per round.
type Figures = BTreeMap<&'static str, Vec<f64>>;

/// What one wrk run reported.
#[derive(Debug, Default)]
struct Load {
    requests_per_sec: f64,
    p99_ms: f64,
    requests: u64,
    non_2xx: u64,
    timeouts: u64,
}

fn parse_duration_ms(text: &str) -> Option<f64> {
    let text = text.trim();
    let (number, factor) = if let Some(n) = text.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (text, 1.0)
    };
    number.parse::<f64>().ok().map(|n| n * factor)
}

fn parse_wrk(output: &str) -> Load {
    let mut load = Load::default();
    for line in output.lines().map(str::trim) {
        if let Some(rate) = line.strip_prefix("Requests/sec:") {
            load.requests_per_sec = rate.trim().parse().unwrap_or(0.0);
        } else if let Some(p99) = line.strip_prefix("99%") {
            load.p99_ms = parse_duration_ms(p99).unwrap_or(f64::NAN);
        } else if let Some(n) = line.strip_prefix("Non-2xx or 3xx responses:") {
            load.non_2xx = n.trim().parse().unwrap_or(0);
        } else if let Some((n, _)) = line.split_once(" requests in ") {
            load.requests = n.trim().parse().unwrap_or(0);
        } else if let Some((_, t)) = line.split_once("timeout ") {
            load.timeouts = t.trim().parse().unwrap_or(0);
        }
    }
    load
}

fn wait_for_port(port: u16) -> BenchResult<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(format!("nothing listens on {port}").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

const HTTP_QUEUE: &str = "bench-http";

/// The load each server gets before the measured one.
const WARM_UP: &str = "1s";

/// One server under HTTP load.
#[derive(Debug, Clone, Copy)]
struct HttpServer {
    system: System,
    label: &'static str,
    /// The name under its bar in the chart.
    short: &'static str,
    extra: Option<&'static str>,
    /// A Redis setting (name, value) this server runs under, put back after it.
    redis_setting: Option<(&'static str, &'static str)>,
}

/// What `docs/operations.md` recommends for jobs that carry a trace context.
const TRACED_JOBS_SETTING: (&str, &str) = ("hash-max-listpack-value", "128");

/// Ours as a user runs it: traces started, the default.
const OURS_TRACED: HttpServer = HttpServer {
    short: "ours (default)",
    system: System::Ours,
    label: "ours: axum + queue-axum, traces started (default)",
    extra: None,
    redis_setting: None,
};

const OURS_UNTRACED: HttpServer = HttpServer {
    short: "ours, no traces",
    system: System::Ours,
    label: "ours: axum + queue-axum, `start_traces(false)`",
    extra: Some("no-traces"),
    redis_setting: None,
};

/// The bare endpoint, the baseline of the ratios against raw.
const RAW: HttpServer = HttpServer {
    short: "bare endpoint",
    system: System::Raw,
    label: "raw engine: axum + engine `add`",
    extra: None,
    redis_setting: None,
};

const OURS_TRACED_LISTPACK: HttpServer = HttpServer {
    short: "ours, listpack 128",
    system: System::Ours,
    label: "ours, traces started, on Redis with `hash-max-listpack-value 128`",
    extra: None,
    redis_setting: Some(TRACED_JOBS_SETTING),
};

/// The bare endpoint carrying a trace and nothing else: what the trace itself costs
/// (against [`RAW`]), and the baseline of what ours adds to it ([`OURS_TRACED`]).
const RAW_TRACED: HttpServer = HttpServer {
    short: "bare + trace",
    system: System::Raw,
    label: "raw engine, each job with a new trace context in `tm`",
    extra: Some("traced"),
    redis_setting: None,
};

/// NestJS's `@Post() @HttpCode(202)` over `@InjectQueue()`'s `queue.add`.
const NEST: HttpServer = HttpServer {
    short: "NestJS",
    system: System::Nest,
    label: "NestJS 11 + `@nestjs/bullmq` (Node BullMQ 6)",
    extra: None,
    redis_setting: None,
};

/// Every server, in the order of the report's rows (each round rotates it).
const HTTP_SERVERS: [HttpServer; 6] = [
    OURS_TRACED,
    OURS_UNTRACED,
    RAW,
    OURS_TRACED_LISTPACK,
    RAW_TRACED,
    NEST,
];

pub(super) fn measure(
    redis: &mut BenchRedis,
    settings: Settings,
    findings: &mut Findings,
) -> BenchResult<String> {
    let script = std::env::temp_dir().join(format!("queue-bench-{}.lua", std::process::id()));
    std::fs::write(
        &script,
        "wrk.method = \"POST\"\n\
         wrk.body = '{\"to\":\"ada@example.com\",\"subject\":\"welcome\"}'\n\
         wrk.headers[\"Content-Type\"] = \"application/json\"\n",
    )?;
    let script_arg = script.display().to_string();
    let duration = format!("{}s", settings.http_secs);
    let mut rates = Figures::new();
    let mut p99s = Figures::new();
    let (mut server_us, mut redis_us) = (Figures::new(), Figures::new());
    let mut checks: BTreeMap<&'static str, (u64, u64, u64, u64)> = BTreeMap::new();
    let servers = HTTP_SERVERS;
    let rounds = settings.paired_rounds;
    for round in 0..rounds {
        for HttpServer {
            system,
            label,
            extra,
            redis_setting,
            ..
        } in rotated(&servers, round)
        {
            redis.flush()?;
            let put_back = match redis_setting {
                Some((name, value)) => {
                    let before = redis.config_get(name)?;
                    redis.config_set(name, value)?;
                    Some((name, before))
                }
                None => None,
            };
            let port = free_port()?;
            let port_arg = port.to_string();
            let mut args = vec!["serve", port_arg.as_str()];
            args.extend(extra);
            let mut server = system.spawn(&redis.url(), &args)?;
            wait_for_port(port)?;
            let url = format!("http://127.0.0.1:{port}/enqueue");
            let wrk = |duration: &str| {
                Command::new("wrk")
                    .args([
                        "-t2",
                        "-c64",
                        "-d",
                        duration,
                        "--latency",
                        "-s",
                        &script_arg,
                        &url,
                    ])
                    .output()
                    .map_err(|e| format!("cannot run wrk (apt-get install wrk): {e}"))
            };
            // A second of load first, not measured: a fresh process's first requests
            // pay for its warm-up (Node's JIT above all), which no server in production
            // pays per request.
            wrk(WARM_UP)?;
            let warm_jobs = redis.waiting(HTTP_QUEUE)?;
            let (server_cpu, redis_cpu) = (process_cpu_seconds(server.id())?, redis.cpu_seconds()?);
            let output = wrk(&duration)?;
            let server_cpu = process_cpu_seconds(server.id())? - server_cpu;
            let redis_cpu = redis.cpu_seconds()? - redis_cpu;
            let _ = server.kill();
            let _ = server.wait();
            if let Some((name, before)) = put_back {
                redis.config_set(name, &before)?;
            }
            let load = parse_wrk(&String::from_utf8_lossy(&output.stdout));
            let jobs = redis.waiting(HTTP_QUEUE)?.saturating_sub(warm_jobs);
            let accepted = load.requests - load.non_2xx;
            if jobs < accepted {
                return Err(format!(
                    "{label}: {accepted} requests got a 202 but only {jobs} jobs are in Redis"
                )
                .into());
            }
            rates.entry(label).or_default().push(load.requests_per_sec);
            let per_request = |seconds: f64| seconds * 1e6 / load.requests.max(1) as f64;
            server_us
                .entry(label)
                .or_default()
                .push(per_request(server_cpu));
            redis_us
                .entry(label)
                .or_default()
                .push(per_request(redis_cpu));
            p99s.entry(label).or_default().push(load.p99_ms);
            let entry = checks.entry(label).or_default();
            *entry = (
                entry.0 + accepted,
                entry.1 + jobs,
                entry.2 + load.non_2xx,
                entry.3 + load.timeouts,
            );
        }
    }
    let _ = std::fs::remove_file(&script);
    let mut out = format!(
        "### HTTP: `POST /enqueue` -> 202, wrk, 64 connections, {duration} per server in each of {rounds} rounds (medians)\n\n\
         Each server gets a second of load before the measured one (a fresh process's \
         first requests pay for its warm-up). CPU per request: the server process's user + \
         system time, and Redis's, over the load, divided by the requests (wrk's own is \
         the rest of the two cores).\n\n\
         | system | requests/s | p99 | server CPU per request | Redis CPU per request | non-2xx | timeouts | 202s (all rounds) | jobs in Redis |\n\
         |---|---|---|---|---|---|---|---|---|\n"
    );
    let median_of =
        |figures: &Figures, label: &str| figures.get(label).map_or(f64::NAN, |v| median(v));
    for HttpServer { label, short, .. } in servers {
        findings.http(short, median_of(&rates, label));
        let (accepted, jobs, non_2xx, timeouts) = checks.get(label).copied().unwrap_or_default();
        out.push_str(&format!(
            "| {label} | {:.0} | {:.2} ms | {:.1} µs | {:.1} µs | {non_2xx} | {timeouts} | {accepted} | {jobs} |\n",
            median_of(&rates, label),
            median_of(&p99s, label),
            median_of(&server_us, label),
            median_of(&redis_us, label),
        ));
    }
    // Each round's own ratios: the servers of a round ran back to back.
    let of = |figures: &Figures, label: &str| figures.get(label).cloned().unwrap_or_default();
    let cpu = |label: &str| -> Vec<f64> {
        of(&server_us, label)
            .iter()
            .zip(of(&redis_us, label))
            .map(|(server, redis)| server + redis)
            .collect()
    };
    let rate_ratio_to = |label: &str, baseline: &str| {
        format!(
            "{}; of the medians {}",
            paired(&of(&rates, label), &of(&rates, baseline)),
            ratio(median_of(&rates, label), median_of(&rates, baseline))
        )
    };
    let cpu_ratio_to =
        |label: &str, baseline: &str| paired(&cpu(baseline), &cpu(label)).to_string();
    let traced = paired(&of(&rates, OURS_TRACED.label), &of(&rates, RAW.label));
    findings.target(
        "HTTP 202s, traces started (the default), ours/bare endpoint",
        "#34, #49",
        Wanted::AtLeast(0.9),
        traced.median,
        format!(
            "(IQR {:.2} to {:.2}, {rounds} paired rounds)",
            traced.q1, traced.q3
        ),
    );
    let rate_ratio = |label: &str| rate_ratio_to(label, RAW.label);
    let cpu_ratio = |label: &str| cpu_ratio_to(label, RAW.label);
    let ours = [OURS_TRACED, OURS_UNTRACED, OURS_TRACED_LISTPACK].map(|s| s.label);
    out.push_str(&format!(
        "\nOurs against raw: the median of the {rounds} rounds' own ratios, with their \
         interquartile range (after requests/s, the ratio of the medians above).\n\n\
         | | traces started (default) | `start_traces(false)` | traces started, Redis \
         `hash-max-listpack-value 128` |\n|---|---|---|---|\n\
         | requests/s ours/raw | {} |\n\
         | CPU per request (server + Redis) raw/ours | {} |\n\n",
        ours.map(rate_ratio).join(" | "),
        ours.map(cpu_ratio).join(" | "),
    ));
    out.push_str(&format!(
        "The trace's own cost and ours beside it, paired by round as above: the bare \
         endpoint adding each job with a new trace context in BullMQ's telemetry field, \
         against the bare endpoint (what any producer of traced jobs pays; the table above \
         says how much of it is Redis's), and ours with traces started against that (what \
         our layer, extractor, `add` and 202 add to a traced request).\n\n\
         | | raw with the trace, against raw | ours traced, against raw with the trace |\n\
         |---|---|---|\n\
         | requests/s, the other's over the baseline's | {} | {} |\n\
         | CPU per request (server + Redis), the baseline's over the other's | {} | {} |\n\n",
        rate_ratio_to(RAW_TRACED.label, RAW.label),
        rate_ratio_to(OURS_TRACED.label, RAW_TRACED.label),
        cpu_ratio_to(RAW_TRACED.label, RAW.label),
        cpu_ratio_to(OURS_TRACED.label, RAW_TRACED.label),
    ));
    out.push_str(&format!(
        "Against NestJS, paired by round: ours (default) answers {} times its requests/s \
         (of the medians {:.2}), with {:.2} of its p99 and {:.2} of its server CPU per \
         request.\n\n",
        paired(&of(&rates, OURS_TRACED.label), &of(&rates, NEST.label)),
        median_of(&rates, OURS_TRACED.label) / median_of(&rates, NEST.label),
        median_of(&p99s, OURS_TRACED.label) / median_of(&p99s, NEST.label),
        median_of(&server_us, OURS_TRACED.label) / median_of(&server_us, NEST.label),
    ));
    Ok(out)
}

/// CPU seconds (user + system) the process `pid` has used so far, from `/proc`.
fn process_cpu_seconds(pid: u32) -> BenchResult<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name, which is in brackets and may hold spaces.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime: the 14th and 15th fields of the line, the 12th and 13th here.
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    let (Some(user), Some(system)) = (ticks(11), ticks(12)) else {
        return Err(format!("cannot read the CPU time of process {pid}").into());
    };
    Ok((user + system) / clock_ticks_per_second())
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`; 100 on Linux nearly always).
fn clock_ticks_per_second() -> f64 {
    super::command_output("getconf", &["CLK_TCK"])
        .parse()
        .unwrap_or(100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_output_is_read() {
        let output = "Running 10s test @ http://127.0.0.1:1/enqueue
  2 threads and 64 connections
  Latency Distribution
     50%    1.10ms
     99%  850.00us
  123456 requests in 10.00s, 20.00MB read
  Socket errors: connect 0, read 0, write 0, timeout 3
  Non-2xx or 3xx responses: 12
Requests/sec:  12345.67
";
        let load = parse_wrk(output);
        assert_eq!(load.requests, 123_456);
        assert_eq!(load.non_2xx, 12);
        assert_eq!(load.timeouts, 3);
        assert!((load.p99_ms - 0.85).abs() < 1e-9);
        assert!((load.requests_per_sec - 12_345.67).abs() < 1e-9);
    }
}
