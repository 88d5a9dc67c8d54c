//! What an operator reads of a queue in a bounded number of commands whatever its size
//! (PATCHES.md, change 28): a page of a state's jobs as listing rows whose strings
//! Redis cuts, a bounded search of a state, and the timestamp of the job that has
//! waited longest. Scripts of ours (`ext/commands/getJobRows-1.lua`,
//! `getWaitingRows-2.lua`, `scanJobRows-1.lua`, `scanWaitingRows-2.lua`,
//! `getOldestWaiting-2.lua`), read-only, on one queue's keys.

use redis::FromRedisValue;

use super::groups::GROUPED_WAITING;
use super::registered::script;
use crate::error::Error;
use crate::keys::QueueKeys;
use crate::queue::Queue;
use crate::redis_connection::RedisConnection;
use crate::types::JobState;

/// Fields of one row in the scripts' answers (`add_row` in `jobRows.lua`).
const ROW: usize = 9;

/// One job as a listing shows it, every string cut to the bound it was read with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobRow {
    /// The job's id (cut when longer than the bound: then no link can name it).
    pub id: String,
    /// Whether `id` was cut.
    pub id_clipped: bool,
    /// The job's name.
    pub name: String,
    /// When it was added, ms since the epoch.
    pub timestamp_ms: u64,
    /// When its last attempt started.
    pub processed_on_ms: Option<u64>,
    /// When it finished.
    pub finished_on_ms: Option<u64>,
    /// Attempts made.
    pub attempts_made: u32,
    /// Why it last failed.
    pub failed_reason: Option<String>,
    /// Attempts allowed (`opts.attempts`, 1 when unset).
    pub max_attempts: u32,
}

/// What a search of a state matches.
#[derive(Debug, Clone, Copy)]
pub enum RowFilter<'a> {
    /// Ids that start with this.
    IdPrefix(&'a str),
    /// Jobs of this name.
    Name(&'a str),
    /// Jobs whose payload holds `value` at the dot-separated `path`.
    DataField {
        /// The field, as `user.id`.
        path: &'a str,
        /// The value, compared as JSON (or as text).
        value: &'a serde_json::Value,
    },
}

/// The bounds of one search.
#[derive(Debug, Clone, Copy)]
pub struct RowScanLimits {
    /// The position in the state to start from.
    pub from: usize,
    /// How many ids to look at.
    pub jobs: usize,
    /// The most matches to return.
    pub matches: usize,
    /// Oldest first rather than newest first.
    pub oldest_first: bool,
    /// The bound (in bytes) of every string of a row.
    pub clip: usize,
    /// The most payload bytes decoded in all.
    pub payload_bytes: usize,
    /// The largest payload decoded; larger ones are skipped and counted.
    pub largest_payload: usize,
}

/// What one search found.
#[derive(Debug, Clone, Default)]
pub struct RowScan {
    /// The matches.
    pub rows: Vec<JobRow>,
    /// How many ids were looked at.
    pub scanned: usize,
    /// How many ids the range held (fewer than asked: the state ended).
    pub read: usize,
    /// Payloads too large to search, skipped.
    pub skipped_large: usize,
}

impl Queue {
    /// The rows of `state`'s jobs from position `start` to `stop` (inclusive), newest
    /// first or oldest first, every string cut to `clip` bytes: one script. Waiting jobs
    /// are the wait list's, then the grouped jobs waiting their turn (change 34).
    pub async fn get_job_rows(
        &self,
        state: JobState,
        start: usize,
        stop: usize,
        oldest_first: bool,
        clip: usize,
    ) -> Result<Vec<JobRow>, Error> {
        let Some((key, kind)) = state_key(self.keys(), state) else {
            return Ok(Vec::new());
        };
        let args = [
            self.keys().key_prefix(),
            kind.to_owned(),
            start.to_string(),
            stop.to_string(),
            flag(oldest_first),
            clip.max(1).to_string(),
        ];
        let reply = self
            .run_on_state(state, ["getJobRows", "getWaitingRows"], key, &args)
            .await?;
        Ok(rows(&strings(reply)?))
    }

    /// Runs `scripts[0]` on `key`, the state's own; for the waiting state `scripts[1]`
    /// on the wait list, then the grouped jobs waiting their turn in their groups
    /// (`gs:waiting`, change 34), which are waiting jobs too.
    async fn run_on_state(
        &self,
        state: JobState,
        scripts: [&str; 2],
        key: String,
        args: &[String],
    ) -> Result<redis::Value, Error> {
        if state != JobState::Waiting {
            return run(self.connection(), scripts[0], &key, args).await;
        }
        let mut connection = self.connection().connection();
        script(self.connection(), scripts[1])?
            .execute(
                &mut connection,
                &[key, self.keys().get(GROUPED_WAITING)],
                args,
            )
            .await
    }

    /// A bounded search of `state` for jobs that match `filter`: one script. Waiting
    /// jobs are the wait list's, then the grouped jobs waiting their turn (change 34).
    pub async fn scan_job_rows(
        &self,
        state: JobState,
        filter: RowFilter<'_>,
        limits: &RowScanLimits,
    ) -> Result<RowScan, Error> {
        let Some((key, kind)) = state_key(self.keys(), state) else {
            return Ok(RowScan::default());
        };
        let (mode, needle, path) = match filter {
            RowFilter::IdPrefix(prefix) => ("prefix", prefix.to_owned(), ""),
            RowFilter::Name(name) => ("name", name.to_owned(), ""),
            RowFilter::DataField { path, value } => ("data", value.to_string(), path),
        };
        let args = [
            self.keys().key_prefix(),
            kind.to_owned(),
            limits.from.to_string(),
            limits.jobs.max(1).to_string(),
            limits.matches.max(1).to_string(),
            flag(limits.oldest_first),
            limits.clip.max(1).to_string(),
            mode.to_owned(),
            needle,
            path.to_owned(),
            limits.payload_bytes.to_string(),
            limits.largest_payload.to_string(),
        ];
        let reply = self
            .run_on_state(state, ["scanJobRows", "scanWaitingRows"], key, &args)
            .await?;
        let reply = strings(reply)?;
        let number = |i: usize| {
            reply
                .get(i)
                .and_then(|v| std::str::from_utf8(v).ok())
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0)
        };
        Ok(RowScan {
            rows: rows(reply.get(3..).unwrap_or_default()),
            scanned: number(0),
            read: number(1),
            skipped_large: number(2),
        })
    }

    /// When the job that has waited longest was added (the wait list's tail), ms since
    /// the epoch; `None` when nothing waits.
    pub async fn get_oldest_waiting_timestamp(&self) -> Result<Option<u64>, Error> {
        let keys = self.keys();
        let script = script(self.connection(), "getOldestWaiting")?;
        let mut conn = self.connection().connection();
        let reply = script
            .execute(
                &mut conn,
                &[keys.wait(), keys.get(GROUPED_WAITING)],
                &[keys.key_prefix()],
            )
            .await?;
        let timestamp =
            Option::<String>::from_redis_value(reply).map_err(redis::RedisError::from)?;
        Ok(timestamp.and_then(|t| t.parse().ok()))
    }
}

/// The key of `state`'s list or sorted set, and which it is.
fn state_key(keys: &QueueKeys, state: JobState) -> Option<(String, &'static str)> {
    match state {
        JobState::Waiting => Some((keys.wait(), "list")),
        JobState::Active => Some((keys.active(), "list")),
        JobState::Prioritized => Some((keys.prioritized(), "zset")),
        JobState::Delayed => Some((keys.delayed(), "zset")),
        JobState::Completed => Some((keys.completed(), "zset")),
        JobState::Failed => Some((keys.failed(), "zset")),
        JobState::WaitingChildren => Some((keys.waiting_children(), "zset")),
        JobState::Unknown => None,
    }
}

fn flag(on: bool) -> String {
    if on { "1" } else { "0" }.to_owned()
}

/// Runs our script `name` on `key` with `args`.
async fn run(
    conn: &RedisConnection,
    name: &str,
    key: &str,
    args: &[String],
) -> Result<redis::Value, Error> {
    let mut connection = conn.connection();
    script(conn, name)?
        .execute(&mut connection, &[key], args)
        .await
}

/// A reply of strings and numbers, each as its bytes.
fn strings(reply: redis::Value) -> Result<Vec<Vec<u8>>, Error> {
    Ok(Vec::<Vec<u8>>::from_redis_value(reply).map_err(redis::RedisError::from)?)
}

/// The rows of a script's answer, as `add_row` laid them out.
fn rows(reply: &[Vec<u8>]) -> Vec<JobRow> {
    let text = |bytes: &Vec<u8>| {
        let text = String::from_utf8_lossy(bytes).into_owned();
        // A cut may split a character: drop the half.
        text.trim_end_matches('\u{FFFD}').to_owned()
    };
    let number = |bytes: &Vec<u8>| {
        std::str::from_utf8(bytes)
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .map(|v| v as u64)
    };
    reply
        .chunks_exact(ROW)
        .map(|f| JobRow {
            id: text(&f[0]),
            id_clipped: f[1] == b"1",
            name: text(&f[2]),
            timestamp_ms: number(&f[3]).unwrap_or(0),
            processed_on_ms: number(&f[4]),
            finished_on_ms: number(&f[5]),
            attempts_made: number(&f[6]).map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)),
            failed_reason: Some(text(&f[7])).filter(|r| !r.is_empty()),
            max_attempts: number(&f[8]).map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        })
        .collect()
}
