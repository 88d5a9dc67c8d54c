//! What an operator's dashboard reads, in a bounded number of commands whatever the
//! queue's size: listing rows with their strings cut in Redis, a bounded search, the
//! age of the oldest waiting job, several jobs' states at once.

use std::sync::LazyLock;

use super::EngineQueue;
use crate::error::Error;
use crate::job::JobState;
use crate::snapshot::{JobFilter, JobScan, JobSummary, ScanLimits};

static SUMMARIES: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("lua/rows.lua"),
        include_str!("lua/summaries.lua")
    ))
});
static SCAN: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("lua/rows.lua"),
        include_str!("lua/scan.lua")
    ))
});
static OLDEST: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("lua/oldest.lua")));

/// Fields of one row in the scripts' answers (`add_row` in `lua/rows.lua`).
const ROW: usize = 9;

impl EngineQueue {
    /// The key of `state`'s list or sorted set, and which it is; `None` for a state
    /// Redis does not hold (pending jobs are in the outbox).
    fn state_key(&self, state: JobState) -> Option<(String, &'static str)> {
        let base = self.conn.queue_base(self.name());
        let (suffix, kind) = match state {
            JobState::Waiting => ("wait", "list"),
            JobState::Active => ("active", "list"),
            JobState::Prioritized => ("prioritized", "zset"),
            JobState::Delayed => ("delayed", "zset"),
            JobState::Completed => ("completed", "zset"),
            JobState::Failed => ("failed", "zset"),
            JobState::WaitingChildren => ("waiting-children", "zset"),
            _ => return None,
        };
        Some((format!("{base}:{suffix}"), kind))
    }

    fn job_key_base(&self) -> String {
        format!("{}:", self.conn.queue_base(self.name()))
    }

    pub(crate) async fn get_job_summaries(
        &self,
        state: JobState,
        start: usize,
        stop: usize,
        oldest_first: bool,
        clip: usize,
    ) -> Result<Vec<JobSummary>, Error> {
        let Some((key, kind)) = self.state_key(state) else {
            return Ok(Vec::new());
        };
        let mut invocation = SUMMARIES.prepare_invoke();
        invocation
            .key(key)
            .arg(self.job_key_base())
            .arg(kind)
            .arg(start)
            .arg(stop)
            .arg(if oldest_first { "1" } else { "0" })
            .arg(clip.max(1));
        let reply: Vec<Vec<u8>> = self.conn.script(&invocation).await?;
        Ok(rows(&reply))
    }

    pub(crate) async fn scan_jobs(
        &self,
        state: JobState,
        filter: &JobFilter,
        limits: &ScanLimits,
    ) -> Result<JobScan, Error> {
        let Some((key, kind)) = self.state_key(state) else {
            return Ok(JobScan::default());
        };
        let (mode, needle, path) = match filter {
            JobFilter::IdPrefix(prefix) => ("prefix", prefix.clone(), String::new()),
            JobFilter::Name(name) => ("name", name.clone(), String::new()),
            JobFilter::DataField { path, value } => ("data", value.to_string(), path.clone()),
        };
        let mut invocation = SCAN.prepare_invoke();
        invocation
            .key(key)
            .arg(self.job_key_base())
            .arg(kind)
            .arg(limits.from)
            .arg(limits.jobs.max(1))
            .arg(limits.matches.max(1))
            .arg(if limits.oldest_first { "1" } else { "0" })
            .arg(limits.clip.max(1))
            .arg(mode)
            .arg(needle)
            .arg(path)
            .arg(limits.payload_bytes)
            .arg(limits.largest_payload);
        let reply: Vec<Vec<u8>> = self.conn.script(&invocation).await?;
        let number = |i: usize| {
            reply
                .get(i)
                .and_then(|v| std::str::from_utf8(v).ok())
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0)
        };
        let (scanned, read) = (number(0), number(1));
        // More may follow when the range was full, or when the scan stopped inside it.
        let more = read == limits.jobs.max(1) || scanned < read;
        Ok(JobScan {
            matches: rows(reply.get(3..).unwrap_or_default()),
            scanned,
            skipped_large: number(2),
            next: more.then_some(limits.from + scanned),
        })
    }

    pub(crate) async fn get_oldest_waiting(&self) -> Result<Option<u64>, Error> {
        let mut invocation = OLDEST.prepare_invoke();
        invocation
            .key(format!("{}:wait", self.conn.queue_base(self.name())))
            .arg(self.job_key_base());
        let timestamp: Option<String> = self.conn.script(&invocation).await?;
        Ok(timestamp.and_then(|t| t.parse().ok()))
    }

    /// How many jobs of a finished state finished at or before `before_ms` (their score
    /// in the set is their finishing time); `None` for other states.
    pub(crate) async fn count_older_than(
        &self,
        state: JobState,
        before_ms: u64,
    ) -> Result<Option<u64>, Error> {
        if !matches!(state, JobState::Completed | JobState::Failed) {
            return Ok(None);
        }
        let Some((key, _)) = self.state_key(state) else {
            return Ok(None);
        };
        let n: u64 = self
            .conn
            .query(redis::cmd("ZCOUNT").arg(key).arg("-inf").arg(before_ms))
            .await?;
        Ok(Some(n))
    }

    /// The states of `ids`, in one round trip (each O(1) or O(log n)).
    pub(crate) async fn get_job_states(
        &self,
        ids: &[String],
    ) -> Result<Vec<Option<JobState>>, Error> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in ids {
            self.state_commands(&mut pipe, id);
        }
        let replies: Vec<redis::Value> = self.conn.pipeline(&pipe).await?;
        let mut replies = replies.into_iter();
        ids.iter()
            .map(|_| Self::state_of(replies.by_ref()))
            .collect()
    }
}

/// The rows of a script's answer, as `add_row` laid them out.
fn rows(reply: &[Vec<u8>]) -> Vec<JobSummary> {
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
        .map(|f| JobSummary {
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
