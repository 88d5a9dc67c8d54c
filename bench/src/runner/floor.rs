//! The Redis floor: what this Redis does with `redis-benchmark` alone, so that the
//! other figures can be compared across machines as ratios to it.

use std::process::Command;

use super::redis::BenchRedis;
use crate::BenchResult;

const REQUESTS: &str = "100000";

/// Requests per second `redis-benchmark` reports for `args`.
fn rate(port: u16, args: &[&str]) -> BenchResult<f64> {
    let output = Command::new("redis-benchmark")
        .args(["-p", &port.to_string(), "-q", "-n", REQUESTS])
        .args(args)
        .output()
        .map_err(|e| format!("cannot run redis-benchmark: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    // "SET: 98039.22 requests per second, p50=0.287 msec"; progress lines end in '\r'.
    text.split(['\r', '\n'])
        .filter_map(|line| line.split_once(": "))
        .find_map(|(_, rest)| rest.split_once(" requests per second"))
        .and_then(|(n, _)| n.trim().parse().ok())
        .ok_or_else(|| format!("no rate in redis-benchmark's output: {text}").into())
}

pub(super) fn measure(redis: &mut BenchRedis) -> BenchResult<String> {
    redis.flush()?;
    let set = rate(redis.port(), &["-t", "set"])?;
    let sha = redis.load_trivial_script()?;
    let evalsha = rate(redis.port(), &["evalsha", &sha, "0"])?;
    redis.flush()?;
    Ok(format!(
        "### Redis floor (redis-benchmark, 50 connections)\n\n\
         | SET | EVALSHA (`return 1`) |\n|---|---|\n| {set:.0}/s | {evalsha:.0}/s |\n\n"
    ))
}
