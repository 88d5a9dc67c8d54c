//! The process roster: with [`QueueAppBuilder::process_roster`] on, each process that
//! runs workers records itself in Redis every ten seconds (host, pid, when it started,
//! and per queue its concurrency and the jobs it runs now), for an operator's view
//! ([`QueueApp::get_processes`](crate::QueueApp::get_processes)). A record lives a
//! minute past its last beat; a process whose workers all stopped removes its own.
//!
//! Keys, beside BullMQ's and read by nothing of BullMQ's: `<prefix>:queue-core:processes`
//! (a sorted set of process ids by last beat) and `<prefix>:queue-core:process:<id>`
//! (the record, JSON, with a one-minute expiry).
//!
//! [`QueueAppBuilder::process_roster`]: crate::QueueAppBuilder::process_roster

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::backend::Connection;
use crate::error::Error;
use crate::worker::PulseBoard;

/// How often a process records itself.
const BEAT: Duration = Duration::from_secs(10);
/// How long a record outlives its last beat.
const TTL: Duration = Duration::from_secs(60);
/// The most processes one read lists.
const LISTED: usize = 500;

/// A process that runs workers, as its last beat recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ProcessInfo {
    /// The record's id: host, pid and start time.
    pub id: String,
    /// The host's name.
    pub host: String,
    /// The process id.
    pub pid: u32,
    /// The program's name.
    pub name: String,
    /// When the process started its workers (ms since the Unix epoch).
    pub started_ms: u64,
    /// Its last beat (ms since the Unix epoch).
    pub last_seen_ms: u64,
    /// Its workers, one per queue.
    pub workers: Vec<ProcessWorker>,
}

/// One worker of a [`ProcessInfo`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ProcessWorker {
    /// The queue it serves.
    pub queue: String,
    /// The jobs it may run at once.
    pub concurrency: usize,
    /// The jobs it ran at the beat.
    pub busy: usize,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn program() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

fn set_key(prefix: &str) -> String {
    format!("{prefix}:queue-core:processes")
}

fn record_key(prefix: &str, id: &str) -> String {
    format!("{prefix}:queue-core:process:{id}")
}

/// This process's place in the roster: whether its beat runs now.
#[derive(Debug, Default)]
pub(crate) struct Roster {
    running: AtomicBool,
}

impl Roster {
    /// Starts the beat of `board`'s workers, unless it runs already; it ends, removing
    /// the record, when no worker of the board runs.
    pub(crate) async fn start(self: &Arc<Self>, conn: &Connection, board: &Arc<PulseBoard>) {
        if self.running.swap(true, Ordering::SeqCst) {
            return;
        }
        beat_until_stopped(self.clone(), conn, board).await;
    }
}

async fn beat_until_stopped(roster: Arc<Roster>, conn: &Connection, board: &Arc<PulseBoard>) {
    let started_ms = now_ms();
    let (host, pid) = (host(), std::process::id());
    let mut record = ProcessInfo {
        id: format!("{host}-{pid}-{started_ms}"),
        host,
        pid,
        name: program(),
        started_ms,
        last_seen_ms: started_ms,
        workers: Vec::new(),
    };
    // The first beat before the workers run, so that a page shows them at once.
    beat(conn, board, &mut record).await;
    let (conn, board) = (conn.clone(), board.clone());
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(BEAT).await;
            if !beat(&conn, &board, &mut record).await {
                break;
            }
        }
        roster.running.store(false, Ordering::SeqCst);
    });
}

/// Records `record` with the board's workers now; with none running, removes it and
/// says so (`false`).
async fn beat(conn: &Connection, board: &PulseBoard, record: &mut ProcessInfo) -> bool {
    let prefix = conn.prefix().to_owned();
    record.workers = board
        .readings()
        .into_iter()
        .map(|r| ProcessWorker {
            queue: r.queue,
            concurrency: r.concurrency,
            busy: r.running,
        })
        .collect();
    record.last_seen_ms = now_ms();
    let mut pipe = redis::pipe();
    if record.workers.is_empty() {
        pipe.cmd("DEL").arg(record_key(&prefix, &record.id));
        pipe.cmd("ZREM").arg(set_key(&prefix)).arg(&record.id);
    } else {
        let json = serde_json::to_string(&*record).unwrap_or_default();
        pipe.cmd("SET")
            .arg(record_key(&prefix, &record.id))
            .arg(json)
            .arg("PX")
            .arg(TTL.as_millis() as u64);
        pipe.cmd("ZADD")
            .arg(set_key(&prefix))
            .arg(record.last_seen_ms)
            .arg(&record.id);
        // Processes that stopped beating (killed, not shut down) leave the set.
        pipe.cmd("ZREMRANGEBYSCORE")
            .arg(set_key(&prefix))
            .arg("-inf")
            .arg(record.last_seen_ms.saturating_sub(TTL.as_millis() as u64));
    }
    if let Err(error) = conn.pipeline::<redis::Value>(&pipe).await {
        tracing::debug!(%error, "could not record this process in the roster");
    }
    !record.workers.is_empty()
}

/// The processes of `conn`'s prefix that recorded themselves within the last minute,
/// most recently seen first: two commands, at most 500 processes.
pub(crate) async fn processes(conn: &Connection) -> Result<Vec<ProcessInfo>, Error> {
    let prefix = conn.prefix();
    let since = now_ms().saturating_sub(TTL.as_millis() as u64);
    let read = async {
        let ids: Vec<String> = conn
            .query(
                redis::cmd("ZREVRANGEBYSCORE")
                    .arg(set_key(prefix))
                    .arg("+inf")
                    .arg(since)
                    .arg("LIMIT")
                    .arg(0)
                    .arg(LISTED),
            )
            .await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        // One GET per record: on a cluster they live in different slots.
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.cmd("GET").arg(record_key(prefix, id));
        }
        let records: Vec<Option<String>> = conn.pipeline(&pipe).await?;
        Ok(records
            .into_iter()
            .flatten()
            .filter_map(|json| serde_json::from_str(&json).ok())
            .collect())
    };
    tokio::time::timeout(Duration::from_secs(3), read)
        .await
        .unwrap_or(Err(Error::Timeout {
            what: "get_processes",
            after: Duration::from_secs(3),
        }))
}
