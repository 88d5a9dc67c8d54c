#!/usr/bin/env bash
# Runs every benchmark in one invocation: our framework against the raw engine and Node
# BullMQ, in alternating rounds on a private redis-server, and prints a Markdown report
# (BENCHMARKS.md keeps one) that ends with the targets met or not and the charts it wrote
# (SVG, into BENCH_CHARTS_DIR, by default target/bench-charts; BENCHMARKS.md shows the
# latest full run's from docs/benchmarks/charts). Installs what it needs: redis-server
# and redis-benchmark, wrk, Node's bullmq 6 and 5 (bench/node, pinned by its lock file),
# the NestJS app of the HTTP suite (bench/nestjs, pinned by its lock file) and, for the
# observability suite, Node BullMQ 6 with bullmq-otel 2 (tests/node, the interop tests'
# peer, pinned by its lock file).
#
# A full run takes about 25 minutes on a 2-core machine, after the release build.
# To publish a full run: BENCH_CHARTS_DIR=docs/benchmarks/charts scripts/bench.sh > run.md
#
# Sizes: BENCH_ROUNDS (3), BENCH_JOBS (20000), BENCH_LATENCY_JOBS (500), BENCH_HTTP_SECS (4),
# and for the cost targets' paired comparisons (HTTP, observability on/off, concurrency 1)
# BENCH_PAIRED_ROUNDS (10) of BENCH_PAIRED_JOBS (3000) jobs at concurrency 1.
# BENCH_SUITES=throughput,latency runs only those (of floor, enqueue, throughput, latency,
# http, results, outbox, status, health, observability, encryption, dashboard, groups,
# batches, cluster, slowlink, commands, footprint, scenarios). The scenarios suite runs BullMQ's own
# four (bullmq-bench: queue-add, queue-add-bulk, worker-generic, worker-concurrent). The slowlink suite puts every system behind a
# fault proxy with about 1 ms and 5 ms of added round trip (#48). The encryption suite (sealed payloads on against off, #47)
# runs BENCH_PAIRED_ROUNDS paired rounds of BENCH_ENCRYPTION_JOBS (10000) 1 KB jobs per run.
# The batches suite (#46) runs batch workers against our single-job worker at concurrency
# 100, each batch run between two single-job runs, BENCH_ROUNDS rounds (at least 5) of
# BENCH_JOBS jobs, and the floors of BullMQ's record of a job (Redis's ceiling on a batch
# worker's ratio) in each round (about 4 minutes).
# Progress goes to stderr, the report to stdout, a section as each suite ends (a suite
# that fails leaves the ones before it):  scripts/bench.sh > report.md
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n==> %s\n' "$*" >&2; }

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

say "tools"
command -v redis-server >/dev/null || apt_install redis-server
command -v redis-benchmark >/dev/null || apt_install redis-tools
command -v wrk >/dev/null || apt_install wrk
command -v npm >/dev/null || apt_install nodejs npm

say "Node BullMQ 6 and 5 (bench/node)"
(cd bench/node && npm ci --no-audit --no-fund --loglevel=error) >&2
say "NestJS 11 and @nestjs/bullmq (bench/nestjs)"
(cd bench/nestjs && npm ci --no-audit --no-fund --loglevel=error) >&2
say "Node BullMQ 6 and bullmq-otel 2 (tests/node)"
(cd tests/node && npm ci --no-audit --no-fund --loglevel=error) >&2

say "cargo build --release -p queue-bench"
cargo build --release -p queue-bench >&2

say "running (several minutes)"
# Where cargo put it: CARGO_TARGET_DIR, when set, keeps a benchmark's build apart.
exec "${CARGO_TARGET_DIR:-target}/release/queue-bench"
