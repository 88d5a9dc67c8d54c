//! What the batch chaos run's worker processes and its driver share
//! (tests/tests/batch/chaos.rs): the batch handler, its settings and the log it keeps.
//!
//! A batch's handler appends `start <pid> <seq> <ms> <ids> <recovered ids>` to a Redis
//! list as it starts, works for [`WORK`], then in one `MULTI` adds 1 to each of its
//! jobs' counts in the `done` hash and appends `end <pid> <seq> <ms>`. A process
//! SIGKILLed during the work writes no end for that batch and counts none of its jobs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queue_core::worker::{Batch, BatchResult};
use queue_core::{Dep, JobError, Processor};
use redis::AsyncCommands;

/// The queue the run uses.
pub const QUEUE: &str = "batch-chaos";
/// The most jobs a batch takes.
pub const BATCH_SIZE: usize = 50;
/// How long a batch works between its start and its count.
pub const WORK: Duration = Duration::from_millis(200);
/// A worker's lock on a job; a killed worker's jobs come back about this long after
/// its death, plus up to two stalled checks.
pub const LOCK: Duration = Duration::from_secs(1);

/// Where the handlers write: a connection to the run's Redis and the two keys.
#[derive(Clone)]
#[allow(missing_debug_implementations)]
pub struct Log {
    /// A connection to the run's Redis.
    pub conn: redis::aio::MultiplexedConnection,
    /// The list of `start` and `end` lines.
    pub lines: String,
    /// The hash of each job's count of completed runs.
    pub done: String,
}

/// This process's batches, numbered from 0.
static BATCHES: AtomicU64 = AtomicU64::new(0);

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A list of ids as a log line holds it: comma-separated, `-` for none.
fn id_list<'a>(ids: impl Iterator<Item = &'a str>) -> String {
    let joined = ids.collect::<Vec<_>>().join(",");
    if joined.is_empty() {
        "-".to_owned()
    } else {
        joined
    }
}

/// The handler: log the start, work, then count every job and log the end at once.
/// Every job completes.
pub async fn work(batch: Batch<u64>, log: Dep<Log>) -> Result<BatchResult, JobError> {
    let seq = BATCHES.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    let ids = id_list(batch.iter().map(|job| job.id()));
    let recovered = id_list(
        batch
            .iter()
            .filter(|job| job.recovered_from_stall())
            .map(|job| job.id()),
    );
    let mut conn = log.conn.clone();
    conn.rpush::<_, _, ()>(
        &log.lines,
        format!("start {pid} {seq} {} {ids} {recovered}", now_ms()),
    )
    .await
    .map_err(JobError::retry)?;
    tokio::time::sleep(WORK).await;
    let mut count = redis::pipe();
    count.atomic();
    for job in &batch {
        count.hincr(&log.done, job.id(), 1).ignore();
    }
    count
        .rpush(&log.lines, format!("end {pid} {seq} {}", now_ms()))
        .ignore();
    count
        .query_async::<()>(&mut conn)
        .await
        .map_err(JobError::retry)?;
    Ok(BatchResult::new())
}

/// The worker's processor: one batch at a time per process (so that a kill during a
/// batch's work finds no other batch of the process between its count and its
/// completion), short locks and frequent stalled checks so that a killed worker's
/// jobs come back within about a second and a half, and room for a job to stall more
/// than once.
pub fn processor() -> Processor {
    Processor::new(QUEUE)
        .concurrency(1)
        .lock_duration(LOCK)
        .stalled_interval(Duration::from_millis(300))
        .max_stalled_count(10)
        .batch(BATCH_SIZE, Duration::from_millis(20), work)
}

/// The start of a batch, as its log line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// The worker process.
    pub pid: u32,
    /// The batch's number in its process.
    pub seq: u64,
    /// When the handler started, in ms since the epoch.
    pub ms: u64,
    /// Its jobs.
    pub ids: Vec<String>,
    /// Those of its jobs whose earlier run was lost.
    pub recovered: Vec<String>,
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A batch started.
    Start(Started),
    /// A batch counted its jobs (`pid`, `seq`).
    End(u32, u64),
}

fn ids_of(field: &str) -> Vec<String> {
    if field == "-" {
        Vec::new()
    } else {
        field.split(',').map(str::to_owned).collect()
    }
}

/// Reads a log line; `None` for one that is not the handler's.
pub fn parse(line: &str) -> Option<Line> {
    let parts: Vec<&str> = line.split(' ').collect();
    match parts[..] {
        ["start", pid, seq, ms, ids, recovered] => Some(Line::Start(Started {
            pid: pid.parse().ok()?,
            seq: seq.parse().ok()?,
            ms: ms.parse().ok()?,
            ids: ids_of(ids),
            recovered: ids_of(recovered),
        })),
        ["end", pid, seq, _ms] => Some(Line::End(pid.parse().ok()?, seq.parse().ok()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_read_back() {
        let line = format!(
            "start 7 3 1000 {} {}",
            id_list(["a", "b"].into_iter()),
            id_list(std::iter::empty())
        );
        assert_eq!(
            parse(&line),
            Some(Line::Start(Started {
                pid: 7,
                seq: 3,
                ms: 1000,
                ids: vec!["a".into(), "b".into()],
                recovered: Vec::new(),
            }))
        );
        assert_eq!(parse("end 7 3 1200"), Some(Line::End(7, 3)));
        assert_eq!(parse("end 7"), None);
    }
}
