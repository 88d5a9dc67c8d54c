//! A queue page's rows: one state's jobs, a page at a time, or the matches of a bounded
//! search; read as rows whose strings Redis cuts (one script either way).

use queue_core::queue::{JobFilter, JobScan, JobSummary, ScanLimits};
use queue_core::Queue;

use crate::limits::{CLIP_BYTES, PAGE_SIZE, SCAN_IDS, SCAN_JOBS};
use crate::query::Listing;

/// What was read for a listing.
pub(crate) enum Found {
    /// A page of the state's jobs, and whether more follow.
    Page(Vec<JobSummary>, bool),
    /// A search's matches and how far it got.
    Search(JobScan),
}

impl Found {
    /// The rows to show.
    pub(crate) fn rows(&self) -> &[JobSummary] {
        match self {
            Found::Page(rows, _) => rows,
            Found::Search(scan) => &scan.matches,
        }
    }
}

/// Reads `listing` of `queue`: one script.
pub(crate) async fn read(
    queue: &Queue<serde_json::Value>,
    listing: &Listing,
) -> Result<Found, queue_core::Error> {
    let Some((_, filter)) = &listing.search else {
        let skip = (listing.page - 1) * PAGE_SIZE;
        let mut rows = queue
            .get_job_summaries(
                listing.state,
                skip..skip + PAGE_SIZE + 1,
                listing.oldest_first,
                CLIP_BYTES,
            )
            .await?;
        let more = rows.len() > PAGE_SIZE;
        rows.truncate(PAGE_SIZE);
        return Ok(Found::Page(rows, more));
    };
    let mut limits = ScanLimits::default();
    limits.from = listing.from;
    limits.jobs = match filter {
        JobFilter::IdPrefix(_) => SCAN_IDS,
        _ => SCAN_JOBS,
    };
    limits.matches = PAGE_SIZE;
    limits.oldest_first = listing.oldest_first;
    limits.clip = CLIP_BYTES;
    Ok(Found::Search(
        queue.scan_jobs(listing.state, filter, &limits).await?,
    ))
}
