//! What an operator's dashboard reads, each call a bounded number of Redis commands
//! whatever the queue's size: listing rows whose strings Redis itself cuts, a bounded
//! search that says how far it got, the oldest waiting job's age, several jobs' states
//! at once.

use std::ops::Range;

use super::Queue;
use crate::error::Error;
use crate::job::JobState;

/// A job as one row of a listing shows it. Its strings are cut to the length asked for
/// in Redis, so a job with a megabyte name costs the reader that length, not a megabyte;
/// the job's own page reads the whole job.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobSummary {
    /// The job id (cut when `id_clipped`).
    pub id: String,
    /// Whether `id` was cut: then it names no job, and links nowhere.
    pub id_clipped: bool,
    /// The job name, cut.
    pub name: String,
    /// When the job was added (ms since the Unix epoch).
    pub timestamp_ms: u64,
    /// When its last attempt started.
    pub processed_on_ms: Option<u64>,
    /// When it finished.
    pub finished_on_ms: Option<u64>,
    /// Attempts that have finished.
    pub attempts_made: u32,
    /// Attempts allowed (1 when its options set none).
    pub max_attempts: u32,
    /// The last failure's reason, cut.
    pub failed_reason: Option<String>,
}

/// What a bounded search looks for in a state's jobs.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum JobFilter {
    /// Ids that start with this.
    IdPrefix(String),
    /// Jobs of this name.
    Name(String),
    /// Jobs whose payload has `value` at `path` (dot-separated object keys:
    /// `user.id`). A string and a number of the same text match each other
    /// (`"42"` and `42`), as an operator typing either means the same.
    DataField {
        /// The field's path in the payload.
        path: String,
        /// The value it must have.
        value: serde_json::Value,
    },
}

/// The bounds of one [`Queue::scan_jobs`] call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScanLimits {
    /// The position in the state's order to start from (0 is the newest, or the oldest
    /// with `oldest_first`); a previous scan's [`JobScan::next`].
    pub from: usize,
    /// The most jobs looked at.
    pub jobs: usize,
    /// The most matches returned; the scan stops at the last.
    pub matches: usize,
    /// Oldest first rather than newest first.
    pub oldest_first: bool,
    /// The length every string of a match is cut to.
    pub clip: usize,
    /// The most payload bytes decoded (a payload search stops there).
    pub payload_bytes: usize,
    /// Payloads larger than this are skipped, and counted.
    pub largest_payload: usize,
}

impl Default for ScanLimits {
    /// From the start: 5,000 jobs, 50 matches, newest first, strings cut at 200 bytes,
    /// 4 MB of payloads at most, none larger than 64 KB.
    fn default() -> Self {
        ScanLimits {
            from: 0,
            jobs: 5_000,
            matches: 50,
            oldest_first: false,
            clip: 200,
            payload_bytes: 4 << 20,
            largest_payload: 64 << 10,
        }
    }
}

/// What a bounded search found, and how far it got.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobScan {
    /// The matches, in the order scanned.
    pub matches: Vec<JobSummary>,
    /// How many jobs were looked at.
    pub scanned: usize,
    /// Payloads skipped as larger than [`ScanLimits::largest_payload`].
    pub skipped_large: usize,
    /// Where to continue (`ScanLimits::from`), when jobs may remain.
    pub next: Option<usize>,
}

impl<T> Queue<T> {
    /// The jobs of `state` in `range` (newest first, or oldest first), as listing rows
    /// with every string cut to `clip` bytes: one script, whatever the queue's size.
    ///
    /// ```no_run
    /// # async fn demo(queue: queue_core::Queue<serde_json::Value>) -> queue_core::Result<()> {
    /// use queue_core::JobState;
    /// for row in queue.get_job_summaries(JobState::Failed, 0..50, false, 200).await? {
    ///     println!("{} {} {:?}", row.id, row.name, row.failed_reason);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_job_summaries(
        &self,
        state: JobState,
        range: Range<usize>,
        oldest_first: bool,
        clip: usize,
    ) -> Result<Vec<JobSummary>, Error> {
        if range.is_empty() {
            return Ok(Vec::new());
        }
        self.timed("get_job_summaries", async {
            self.engine()
                .await?
                .summaries(state, range.start, range.end - 1, oldest_first, clip)
                .await
        })
        .await
    }

    /// Looks through at most `limits.jobs` jobs of `state` for `filter`, in one script;
    /// says how many it looked at and where to go on.
    ///
    /// ```no_run
    /// # async fn demo(queue: queue_core::Queue<serde_json::Value>) -> queue_core::Result<()> {
    /// use queue_core::{JobFilter, JobState, ScanLimits};
    /// let filter = JobFilter::DataField { path: "user_id".into(), value: 42.into() };
    /// let found = queue.scan_jobs(JobState::Failed, &filter, &ScanLimits::default()).await?;
    /// println!("{} matches among {} jobs", found.matches.len(), found.scanned);
    /// # Ok(()) }
    /// ```
    pub async fn scan_jobs(
        &self,
        state: JobState,
        filter: &JobFilter,
        limits: &ScanLimits,
    ) -> Result<JobScan, Error> {
        self.timed("scan_jobs", async {
            self.engine().await?.scan(state, filter, limits).await
        })
        .await
    }

    /// When the job that has waited longest (the oldest in the wait list) was added:
    /// the queue's latency is now minus this. `None` when nothing waits.
    pub async fn get_oldest_waiting(&self) -> Result<Option<u64>, Error> {
        self.timed("get_oldest_waiting", async {
            self.engine().await?.oldest_waiting().await
        })
        .await
    }

    /// The states of `ids` (`None` for a job that does not exist), in one round trip.
    /// Ids that cannot name a job read as `None` without asking Redis.
    pub async fn get_job_states(&self, ids: &[String]) -> Result<Vec<Option<JobState>>, Error> {
        let asked: Vec<String> = ids
            .iter()
            .filter(|id| crate::options::job_id::could_be_job_id(id))
            .cloned()
            .collect();
        let mut states = self
            .timed("get_job_states", async {
                self.engine().await?.states(&asked).await
            })
            .await?
            .into_iter();
        Ok(ids
            .iter()
            .map(|id| {
                if crate::options::job_id::could_be_job_id(id) {
                    states.next().flatten()
                } else {
                    None
                }
            })
            .collect())
    }

    /// How many jobs [`clean`](Queue::clean) of `state` with this `age` would remove,
    /// where one command can tell: completed and failed jobs, by their finishing time.
    /// `None` for the other states.
    pub async fn count_older_than(
        &self,
        state: JobState,
        age: std::time::Duration,
    ) -> Result<Option<u64>, Error> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let before = now.saturating_sub(u64::try_from(age.as_millis()).unwrap_or(u64::MAX));
        self.timed("count_older_than", async {
            self.engine().await?.finished_before(state, before).await
        })
        .await
    }
}
