//! Jobs as a listing shows them, and what a bounded search looks for and found.

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

/// The bounds of one [`Queue::scan_jobs`](crate::Queue::scan_jobs) call.
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
