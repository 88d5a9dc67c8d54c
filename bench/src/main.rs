//! `queue-bench`: our framework against the raw engine and Node BullMQ, in one run of
//! alternating rounds on one private Redis. Run it with `scripts/bench.sh`.
//!
//! With no arguments it runs every suite and prints the table (`BENCHMARKS.md` keeps
//! one). The other commands are the measured side, run as child processes so that each
//! system is measured the same way, in its own process:
//!
//! ```text
//! queue-bench enqueue <ours|raw> <queue> <single|inflight|bulk|bulk100> <n> [sealed]
//!                                                                     -> {"ms","cpuMs"}
//! queue-bench work    <ours|raw> <queue> <concurrency> <n> [observed[=share]|sealed]
//!                                           -> {"ms","polls","peakRssKb","cpuMs","spans"}
//! queue-bench batch   <ours|raw> <queue> <size> <concurrency> <n> [sleep_ms]
//!                                                  -> {"ms","polls","peakRssKb","cpuMs"}
//! queue-bench latency <ours|raw> <queue> <n>                          -> {"samplesUs"}
//! queue-bench serve   <ours|raw> <port> [no-traces|traced]       (until killed)
//! queue-bench spread  ours <single:<url>|cluster:<urls>> <queues> <concurrency> <n>
//!                                                                     -> {"ms"}
//! ```
//!
//! `no-traces` (ours) serves without starting traces; `traced` (raw) adds each job with a
//! new trace context in BullMQ's telemetry field, as ours does by default.
//!
//! `bulk` adds with `add_bulk` 1,000 at a time, `bulk100` (ours only) 100 at a time.
//! `batch` processes `n` waiting jobs with a batch worker (ours: `Processor::batch`; raw:
//! `WorkerOptions::batch`): batches of up to `size` jobs, `concurrency` batches at once,
//! the handler sleeping `sleep_ms` a batch (none without).
//!
//! `sealed` (ours only) gives the app a keyring and seals the queue's payloads (the
//! encryption suite's "on"). On `bench-1k-<c>` queues the jobs are 1 KB letters, which
//! the handler reads and answers with a small receipt; `enqueue` adds letters to any
//! `bench-1k-` queue.
//!
//! `observed` (ours only) turns on metrics and OpenTelemetry traces, every trace
//! sampled, or the given share of them (`observed=0.1`). On a CPU handler's queue
//! (`bench-p<c>`), each job runs `BENCH_CPU_PASSES` passes of the checksum loop and checks
//! the result against `BENCH_CPU_CHECKSUM` (the runner calibrates both; 80 passes without);
//! on `bench-w<c>` each job waits 1 ms; on any other queue it does nothing. Ours and raw
//! alike.
//!
//! The Node side (`bench/node/bench.mjs`) answers the same commands; the observability
//! suite runs Node BullMQ 6 with and without `bullmq-otel` through `bench/node/observed.mjs`.

pub(crate) mod probe;
mod runner;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = if args.is_empty() {
        runner::run_all()
    } else {
        probe::run(&args)
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("queue-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What can go wrong in a benchmark run: reported as text, the run stops.
type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;
