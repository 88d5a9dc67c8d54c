//! What the group chaos run's worker processes and its driver share
//! (tests/tests/group/chaos.rs): the task and how handlers report what ran when.
//!
//! Each attempt appends `start <group> <pid> <ms>` to a Redis list when it starts and
//! `end <group> <pid> <ms>` when its work is done; a SIGKILLed process writes no end,
//! and the driver ends its attempts at the time it killed it. The most attempts of a
//! group running at once is then read from the list.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queue_core::{group::GroupLimits, Dep, Job, JobError, Processor};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

/// The queue the run uses.
pub const QUEUE: &str = "group-chaos";
/// Each group's concurrency.
pub const GROUP_CONCURRENCY: u32 = 2;

/// One job: it works for `ms` milliseconds for its group.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Task {
    /// The job's group, as its options also say.
    pub group: String,
    /// How long it works.
    pub ms: u64,
}

/// Where the handlers report: a Redis connection and the list's key.
#[derive(Clone)]
#[allow(missing_debug_implementations)]
pub struct Reports {
    /// A connection to the run's Redis.
    pub conn: redis::aio::MultiplexedConnection,
    /// The list the reports go to.
    pub key: String,
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

async fn report(reports: &Reports, what: &str, group: &str) -> Result<(), JobError> {
    let line = format!("{what} {group} {} {}", std::process::id(), now_ms());
    let mut conn = reports.conn.clone();
    conn.rpush::<_, _, ()>(&reports.key, line)
        .await
        .map_err(JobError::retry)
}

/// The handler: report the start, work, report the end.
pub async fn work(job: Job<Task>, reports: Dep<Reports>) -> Result<(), JobError> {
    report(&reports, "start", &job.data.group).await?;
    tokio::time::sleep(Duration::from_millis(job.data.ms)).await;
    report(&reports, "end", &job.data.group).await?;
    Ok(())
}

/// The worker's processor: grouped, short locks so that a killed worker's jobs (and
/// their group slots) come back within seconds, room for many stalls.
pub fn processor() -> Processor {
    Processor::new(QUEUE)
        .concurrency(8)
        .groups(GroupLimits::new().concurrency(GROUP_CONCURRENCY))
        .lock_duration(Duration::from_secs(2))
        .stalled_interval(Duration::from_secs(1))
        .max_stalled_count(1_000)
        .job("work", work)
}

/// The most attempts of each group that ran at once, from the report lines and the
/// time each killed process died (`pid -> ms`). At the same millisecond an end is
/// counted before a start: an attempt ends before its slot is given back.
pub fn most_at_once(lines: &[String], killed: &HashMap<u32, u64>) -> HashMap<String, usize> {
    // (time, +1 / -1, group); per (group, pid) the starts still open.
    let mut events: Vec<(u64, i32, String)> = Vec::new();
    let mut open: HashMap<(String, u32), usize> = HashMap::new();
    for line in lines {
        let parts: Vec<&str> = line.split(' ').collect();
        let [what, group, pid, ms] = parts[..] else {
            continue;
        };
        let (Ok(pid), Ok(ms)) = (pid.parse::<u32>(), ms.parse::<u64>()) else {
            continue;
        };
        let key = (group.to_owned(), pid);
        if what == "start" {
            events.push((ms, 1, group.to_owned()));
            *open.entry(key).or_default() += 1;
        } else {
            events.push((ms, -1, group.to_owned()));
            if let Some(n) = open.get_mut(&key) {
                *n = n.saturating_sub(1);
            }
        }
    }
    for ((group, pid), n) in open {
        // Still open at the end: killed mid-attempt (or the run's last jobs, if any).
        let end = killed.get(&pid).copied().unwrap_or(u64::MAX);
        for _ in 0..n {
            events.push((end, -1, group.clone()));
        }
    }
    events.sort_by_key(|(ms, delta, _)| (*ms, *delta));
    let mut running: HashMap<String, i64> = HashMap::new();
    let mut most: HashMap<String, usize> = HashMap::new();
    for (_, delta, group) in events {
        let now = running.entry(group.clone()).or_default();
        *now += i64::from(delta);
        let top = most.entry(group).or_default();
        *top = (*top).max(usize::try_from(*now).unwrap_or(0));
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlaps_are_counted_and_a_killed_attempt_ends_at_its_kill() {
        let lines: Vec<String> = [
            "start g 1 100",
            "start g 2 110",
            "end g 1 150",
            "start g 3 150",
            "start g 1 160",
            "end g 3 170",
            "start g 3 300",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // pid 2 died at 200: its attempt overlapped 1's and 3's; pid 1's second
        // attempt and 3's last never ended (end of run).
        let most = most_at_once(&lines, &HashMap::from([(2, 200)]));
        assert_eq!(most["g"], 3);
        let most = most_at_once(&lines[..3], &HashMap::from([(2, 120)]));
        assert_eq!(most["g"], 2);
    }
}
