//! What an operator's dashboard reads, in a bounded number of commands whatever the
//! queue's size: listing rows with their strings cut in Redis, a bounded search, the
//! age of the oldest waiting job, several jobs' states at once.

use bullmq::inspect::{JobRow, RowFilter, RowScanLimits};

use super::EngineQueue;
use crate::error::Error;
use crate::job::JobState;
use crate::snapshot::{JobFilter, JobScan, JobSummary, ScanLimits};

impl EngineQueue {
    /// The key of `state`'s list or sorted set; `None` for a state Redis does not hold
    /// (pending jobs are in the outbox).
    fn state_key(&self, state: JobState) -> Option<String> {
        let suffix = match state {
            JobState::Waiting => "wait",
            JobState::Active => "active",
            JobState::Prioritized => "prioritized",
            JobState::Delayed => "delayed",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::WaitingChildren => "waiting-children",
            JobState::Pending => return None,
        };
        Some(format!("{}:{suffix}", self.conn.queue_base(self.name())))
    }

    pub(crate) async fn get_job_summaries(
        &self,
        state: JobState,
        start: usize,
        stop: usize,
        oldest_first: bool,
        clip: usize,
    ) -> Result<Vec<JobSummary>, Error> {
        let Some(state) = engine_state(state) else {
            return Ok(Vec::new());
        };
        // Waiting rows include the grouped jobs waiting their turn (engine change 34).
        let rows = self
            .inner
            .get_job_rows(state, start, stop, oldest_first, clip)
            .await
            .map_err(|e| self.error(e))?;
        Ok(rows.into_iter().map(summary).collect())
    }

    pub(crate) async fn scan_jobs(
        &self,
        state: JobState,
        filter: &JobFilter,
        limits: &ScanLimits,
    ) -> Result<JobScan, Error> {
        let Some(state) = engine_state(state) else {
            return Ok(JobScan::default());
        };
        let filter = match filter {
            JobFilter::IdPrefix(prefix) => RowFilter::IdPrefix(prefix),
            JobFilter::Name(name) => RowFilter::Name(name),
            JobFilter::DataField { path, value } => RowFilter::DataField { path, value },
        };
        let bounds = RowScanLimits {
            from: limits.from,
            jobs: limits.jobs,
            matches: limits.matches,
            oldest_first: limits.oldest_first,
            clip: limits.clip,
            payload_bytes: limits.payload_bytes,
            largest_payload: limits.largest_payload,
        };
        let scan = self
            .inner
            .scan_job_rows(state, filter, &bounds)
            .await
            .map_err(|e| self.error(e))?;
        // More may follow when the range was full, or when the scan stopped inside it.
        let more = scan.read == limits.jobs.max(1) || scan.scanned < scan.read;
        Ok(JobScan {
            matches: scan.rows.into_iter().map(summary).collect(),
            scanned: scan.scanned,
            skipped_large: scan.skipped_large,
            next: more.then_some(limits.from + scan.scanned),
        })
    }

    pub(crate) async fn get_oldest_waiting(&self) -> Result<Option<u64>, Error> {
        self.inner
            .get_oldest_waiting_timestamp()
            .await
            .map_err(|e| self.error(e))
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
        let Some(key) = self.state_key(state) else {
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

/// The engine's state of `state`; `None` for one Redis does not hold.
fn engine_state(state: JobState) -> Option<bullmq::JobState> {
    Some(match state {
        JobState::Waiting => bullmq::JobState::Waiting,
        JobState::Active => bullmq::JobState::Active,
        JobState::Prioritized => bullmq::JobState::Prioritized,
        JobState::Delayed => bullmq::JobState::Delayed,
        JobState::Completed => bullmq::JobState::Completed,
        JobState::Failed => bullmq::JobState::Failed,
        JobState::WaitingChildren => bullmq::JobState::WaitingChildren,
        JobState::Pending => return None,
    })
}

/// An engine row as our summary.
fn summary(row: JobRow) -> JobSummary {
    JobSummary {
        id: row.id,
        id_clipped: row.id_clipped,
        name: row.name,
        timestamp_ms: row.timestamp_ms,
        processed_on_ms: row.processed_on_ms,
        finished_on_ms: row.finished_on_ms,
        attempts_made: row.attempts_made,
        failed_reason: row.failed_reason,
        max_attempts: row.max_attempts,
    }
}
