//! The suites: each runs its rounds and returns its section of the report.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use super::redis::{free_port, BenchRedis};
use super::stats::{median, percentile};
use super::systems::System;
use super::{rotated, Settings};
use crate::BenchResult;

/// Per system, one figure per round.
type Figures = BTreeMap<&'static str, Vec<f64>>;

fn med(figures: &Figures, system: System) -> f64 {
    figures.get(system.label()).map_or(f64::NAN, |v| median(v))
}

fn record(figures: &mut Figures, system: System, value: f64) {
    figures.entry(system.label()).or_default().push(value);
}

fn field(value: &serde_json::Value, name: &str) -> BenchResult<f64> {
    value[name]
        .as_f64()
        .ok_or_else(|| format!("no `{name}` in {value}").into())
}

fn ratio(a: f64, b: f64) -> String {
    format!("{:.2}", a / b)
}

const ENQUEUE_QUEUE: &str = "bench-enqueue";

pub(super) fn enqueue(redis: &mut BenchRedis, settings: Settings) -> BenchResult<String> {
    let modes = [
        ("single", "`add`, one at a time", settings.jobs.min(2_000)),
        ("inflight", "`add`, 100 in flight", settings.jobs),
        ("bulk", "`add_bulk`, batches of 1,000", settings.jobs),
    ];
    let mut out = String::from(
        "### Enqueue (jobs/s, median of the rounds)\n\n\
         | mode | jobs | ours | raw engine | Node BullMQ | ours/raw | ours/Node |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for (mode, label, n) in modes {
        let mut figures = Figures::new();
        for round in 0..settings.rounds {
            for system in rotated(&System::ALL, round) {
                redis.flush()?;
                let n_arg = n.to_string();
                let result = system.run(&redis.url(), &["enqueue", ENQUEUE_QUEUE, mode, &n_arg])?;
                record(
                    &mut figures,
                    system,
                    n as f64 / field(&result, "ms")? * 1000.0,
                );
            }
        }
        let (ours, raw, node) = (
            med(&figures, System::Ours),
            med(&figures, System::Raw),
            med(&figures, System::Node),
        );
        out.push_str(&format!(
            "| {label} | {n} | {ours:.0} | {raw:.0} | {node:.0} | {} | {} |\n",
            ratio(ours, raw),
            ratio(ours, node)
        ));
        eprintln!("enqueue {mode}: {figures:?}");
    }
    out.push('\n');
    Ok(out)
}

/// Peak worker RSS at concurrency 100, KiB, per system.
pub(super) type Rss = Figures;

pub(super) fn throughput(redis: &mut BenchRedis, settings: Settings) -> BenchResult<(String, Rss)> {
    let mut out = String::from(
        "### Processing throughput, no-op handler (jobs/s, median of the rounds)\n\n\
         Redis busy: the share of the run's wall time Redis spent on CPU (one core at most).\n\n\
         | concurrency | ours (`#[processor]`) | raw engine worker | Node BullMQ worker | ours/raw | ours/Node | Redis busy (ours / raw / Node) |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let mut rss = Rss::new();
    let n = settings.jobs.to_string();
    for concurrency in [1u32, 10, 100] {
        let queue = format!("bench-c{concurrency}");
        let concurrency_arg = concurrency.to_string();
        let mut figures = Figures::new();
        let mut busy = Figures::new();
        for round in 0..settings.rounds {
            for system in rotated(&System::ALL, round) {
                redis.flush()?;
                System::Raw.run(&redis.url(), &["enqueue", &queue, "bulk", &n])?;
                let cpu_before = redis.cpu_seconds()?;
                let result = system.run(&redis.url(), &["work", &queue, &concurrency_arg, &n])?;
                let redis_cpu = redis.cpu_seconds()? - cpu_before;
                let ms = field(&result, "ms")?;
                record(&mut figures, system, settings.jobs as f64 / ms * 1000.0);
                // The child's start-up is outside `ms` but inside the CPU reading; Redis
                // is idle then, so this hardly overstates how busy it was.
                record(&mut busy, system, redis_cpu / (ms / 1000.0));
                if concurrency == 100 {
                    record(&mut rss, system, field(&result, "peakRssKb")?);
                }
            }
        }
        let (ours, raw, node) = (
            med(&figures, System::Ours),
            med(&figures, System::Raw),
            med(&figures, System::Node),
        );
        let percent = |system| format!("{:.0} %", med(&busy, system) * 100.0);
        out.push_str(&format!(
            "| {concurrency} | {ours:.0} | {raw:.0} | {node:.0} | {} | {} | {} / {} / {} |\n",
            ratio(ours, raw),
            ratio(ours, node),
            percent(System::Ours),
            percent(System::Raw),
            percent(System::Node),
        ));
        eprintln!("throughput c{concurrency}: {figures:?}");
    }
    out.push('\n');
    Ok((out, rss))
}

/// Processing with metrics and OpenTelemetry traces on, against off: same binary, same
/// jobs, the order rotated in every round.
pub(super) fn observability(redis: &mut BenchRedis, settings: Settings) -> BenchResult<String> {
    // (label, the probe's extra argument)
    let modes: [(&str, Option<&str>); 3] = [
        ("off", None),
        ("on", Some("observed")),
        ("on, 10 % sampled", Some("observed=0.1")),
    ];
    let mut out = String::from(
        "### Processing with metrics and traces on (jobs/s, median of the rounds)\n\n\
         On: the app's Prometheus `Metrics`, and a `tracing-opentelemetry` layer (its \
         defaults) over the OpenTelemetry SDK's batch processor, whose exporter counts the \
         spans and drops them: the cost inside the process, without a collector's network. \
         Every trace is recorded, or a tenth of them (`ParentBased(TraceIdRatioBased(0.1))`).\n\n\
         | concurrency | off | on | on/off (target >= 0.97) | 10 % sampled | sampled/off | spans per job (on) |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let n = settings.jobs.to_string();
    for concurrency in [1u32, 10, 100] {
        let queue = format!("bench-c{concurrency}");
        let concurrency_arg = concurrency.to_string();
        let mut rates: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        let mut spans = Vec::new();
        for round in 0..settings.rounds {
            for (label, extra) in rotated(&modes, round) {
                redis.flush()?;
                System::Raw.run(&redis.url(), &["enqueue", &queue, "bulk", &n])?;
                let mut args = vec!["work", queue.as_str(), concurrency_arg.as_str(), n.as_str()];
                args.extend(extra);
                let result = System::Ours.run(&redis.url(), &args)?;
                let rate = settings.jobs as f64 / field(&result, "ms")? * 1000.0;
                rates.entry(label).or_default().push(rate);
                if extra == Some("observed") {
                    spans.push(field(&result, "spans")? / settings.jobs as f64);
                }
            }
        }
        let rate = |label: &str| rates.get(label).map_or(f64::NAN, |v| median(v));
        let (off, on, sampled) = (rate("off"), rate("on"), rate("on, 10 % sampled"));
        out.push_str(&format!(
            "| {concurrency} | {off:.0} | {on:.0} | {} | {sampled:.0} | {} | {:.2} |\n",
            ratio(on, off),
            ratio(sampled, off),
            median(&spans)
        ));
        eprintln!("observability c{concurrency}: {rates:?}");
    }
    out.push('\n');
    Ok(out)
}

pub(super) fn latency(redis: &mut BenchRedis, settings: Settings) -> BenchResult<String> {
    let mut samples: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
    let n = settings.latency_jobs.to_string();
    for round in 0..settings.rounds {
        for system in rotated(&System::ALL, round) {
            redis.flush()?;
            let result = system.run(&redis.url(), &["latency", "bench-latency", &n])?;
            let got = result["samplesUs"]
                .as_array()
                .ok_or("no samplesUs")?
                .iter()
                .filter_map(serde_json::Value::as_u64);
            samples.entry(system.label()).or_default().extend(got);
        }
    }
    let ms = |us: u64| us as f64 / 1000.0;
    let mut out = format!(
        "### Latency, `add` to handler start, idle worker ({} probes per system)\n\n\
         | system | p50 | p99 | max |\n|---|---|---|---|\n",
        settings.latency_jobs * settings.rounds as u64
    );
    for system in System::ALL {
        let s = samples.get(system.label()).cloned().unwrap_or_default();
        out.push_str(&format!(
            "| {} | {:.2} ms | {:.2} ms | {:.2} ms |\n",
            system.label(),
            ms(percentile(&s, 50.0)),
            ms(percentile(&s, 99.0)),
            ms(percentile(&s, 100.0))
        ));
    }
    let p99 = |system: System| {
        percentile(samples.get(system.label()).map_or(&[][..], |v| v), 99.0) as f64
    };
    out.push_str(&format!(
        "\np99 ours/Node: {} (target <= 1); ours/raw: {}\n\n",
        ratio(p99(System::Ours), p99(System::Node)),
        ratio(p99(System::Ours), p99(System::Raw))
    ));
    Ok(out)
}

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

/// One server under HTTP load.
#[derive(Debug, Clone, Copy)]
struct HttpServer {
    system: System,
    label: &'static str,
    extra: Option<&'static str>,
}

const HTTP_SERVERS: [HttpServer; 3] = [
    HttpServer {
        system: System::Ours,
        label: "ours: axum + queue-axum, traces started (default)",
        extra: None,
    },
    HttpServer {
        system: System::Ours,
        label: "ours: axum + queue-axum, `start_traces(false)`",
        extra: Some("no-traces"),
    },
    HttpServer {
        system: System::Raw,
        label: "raw engine: axum + engine `add`",
        extra: None,
    },
];

pub(super) fn http(redis: &mut BenchRedis, settings: Settings) -> BenchResult<String> {
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
    let mut checks: BTreeMap<&'static str, (u64, u64, u64, u64)> = BTreeMap::new();
    let servers = HTTP_SERVERS;
    for round in 0..settings.rounds {
        for HttpServer {
            system,
            label,
            extra,
        } in rotated(&servers, round)
        {
            redis.flush()?;
            let port = free_port()?;
            let port_arg = port.to_string();
            let mut args = vec!["serve", port_arg.as_str()];
            args.extend(extra);
            let mut server = system.spawn(&redis.url(), &args)?;
            wait_for_port(port)?;
            let url = format!("http://127.0.0.1:{port}/enqueue");
            let output = Command::new("wrk")
                .args([
                    "-t2",
                    "-c64",
                    "-d",
                    &duration,
                    "--latency",
                    "-s",
                    &script_arg,
                    &url,
                ])
                .output()
                .map_err(|e| format!("cannot run wrk (apt-get install wrk): {e}"))?;
            let _ = server.kill();
            let _ = server.wait();
            let load = parse_wrk(&String::from_utf8_lossy(&output.stdout));
            let jobs = redis.waiting(HTTP_QUEUE)?;
            let accepted = load.requests - load.non_2xx;
            if jobs < accepted {
                return Err(format!(
                    "{label}: {accepted} requests got a 202 but only {jobs} jobs are in Redis"
                )
                .into());
            }
            rates.entry(label).or_default().push(load.requests_per_sec);
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
        "### HTTP: `POST /enqueue` -> 202, wrk, 64 connections, {duration} per round\n\n\
         | system | requests/s | p99 | non-2xx | timeouts | 202s (all rounds) | jobs in Redis |\n\
         |---|---|---|---|---|---|---|\n"
    );
    let median_of =
        |figures: &Figures, label: &str| figures.get(label).map_or(f64::NAN, |v| median(v));
    for HttpServer { label, .. } in servers {
        let (accepted, jobs, non_2xx, timeouts) = checks.get(label).copied().unwrap_or_default();
        out.push_str(&format!(
            "| {label} | {:.0} | {:.2} ms | {non_2xx} | {timeouts} | {accepted} | {jobs} |\n",
            median_of(&rates, label),
            median_of(&p99s, label),
        ));
    }
    let raw = median_of(&rates, HTTP_SERVERS[2].label);
    out.push_str(&format!(
        "\nrequests/s ours/raw: {} (traces started), {} (not started)\n\n",
        ratio(median_of(&rates, HTTP_SERVERS[0].label), raw),
        ratio(median_of(&rates, HTTP_SERVERS[1].label), raw),
    ));
    Ok(out)
}

const FOOTPRINT_JOBS: u64 = 10_000;

pub(super) fn footprint(redis: &mut BenchRedis, rss: &Rss) -> BenchResult<String> {
    let mut bytes = Figures::new();
    let n = FOOTPRINT_JOBS.to_string();
    for system in System::ALL {
        redis.flush()?;
        let before = redis.used_memory()?;
        system.run(&redis.url(), &["enqueue", "bench-footprint", "bulk", &n])?;
        let after = redis.used_memory()?;
        record(
            &mut bytes,
            system,
            after.saturating_sub(before) as f64 / FOOTPRINT_JOBS as f64,
        );
    }
    let kib_to_mib = |kib: f64| kib / 1024.0;
    let mut out = String::from(
        "### Footprint\n\n| | ours | raw engine | Node BullMQ | ours/Node |\n|---|---|---|---|---|\n",
    );
    let (ours, raw, node) = (
        med(rss, System::Ours),
        med(rss, System::Raw),
        med(rss, System::Node),
    );
    out.push_str(&format!(
        "| worker peak RSS, concurrency 100 | {:.1} MiB | {:.1} MiB | {:.1} MiB | {} |\n",
        kib_to_mib(ours),
        kib_to_mib(raw),
        kib_to_mib(node),
        ratio(ours, node)
    ));
    let (ours, raw, node) = (
        med(&bytes, System::Ours),
        med(&bytes, System::Raw),
        med(&bytes, System::Node),
    );
    out.push_str(&format!(
        "| Redis bytes per waiting job ({FOOTPRINT_JOBS} jobs) | {ours:.0} | {raw:.0} | {node:.0} | {} |\n\n",
        ratio(ours, node)
    ));
    Ok(out)
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
