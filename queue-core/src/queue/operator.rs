//! What an operator's dashboard reads, each call a bounded number of Redis commands
//! whatever the queue's size: listing rows whose strings Redis itself cuts, a bounded
//! search that says how far it got, the oldest waiting job's age, several jobs' states
//! at once.

use std::ops::Range;

use super::Queue;
use crate::error::Error;
use crate::job::JobState;
use crate::snapshot::{JobFilter, JobScan, JobSummary, ScanLimits};

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
                .get_job_summaries(state, range.start, range.end - 1, oldest_first, clip)
                .await
        })
        .await
    }

    /// Looks through at most `limits.jobs` jobs of `state` for `filter`, in one script;
    /// says how many it looked at and where to go on.
    ///
    /// ```no_run
    /// # async fn demo(queue: queue_core::Queue<serde_json::Value>) -> queue_core::Result<()> {
    /// use queue_core::{queue::JobFilter, JobState, queue::ScanLimits};
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
            self.engine().await?.scan_jobs(state, filter, limits).await
        })
        .await
    }

    /// When the job that has waited longest (the oldest in the wait list) was added:
    /// the queue's latency is now minus this. `None` when nothing waits.
    pub async fn get_oldest_waiting(&self) -> Result<Option<u64>, Error> {
        self.timed("get_oldest_waiting", async {
            self.engine().await?.get_oldest_waiting().await
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
                self.engine().await?.get_job_states(&asked).await
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
            self.engine().await?.count_older_than(state, before).await
        })
        .await
    }
}
