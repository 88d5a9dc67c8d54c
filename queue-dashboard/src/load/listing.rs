//! A queue page's rows: one state's jobs, a page at a time, or the matches of a bounded
//! search; read as rows whose strings Redis cuts (one script either way).
//!
//! A payload field's search never opens a sealed payload ([`queue_core::encryption`]):
//! opening thousands to look into them would cost a decryption each, and a match would
//! tell a sealed value to anyone allowed to search, a guess at a time. Redis sees the
//! envelope, which holds no field of the payload, so a sealed job does not match; the
//! one way it could, a search for one of the envelope's own keys, is read again here and
//! its sealed matches left out.

use futures::future::try_join_all;
use queue_core::queue::{JobFilter, JobScan, JobSummary, ScanLimits};
use queue_core::Queue;

use crate::limits::{CLIP_BYTES, PAGE_SIZE, SCAN_IDS, SCAN_JOBS};
use crate::query::Listing;

/// What was read for a listing.
pub(crate) enum Found {
    /// A page of the state's jobs, and whether more follow.
    Page(Vec<JobSummary>, bool),
    /// A search's matches and how far it got, and how many of them were sealed jobs
    /// matched by their envelope alone, and left out.
    Search(JobScan, usize),
}

/// The keys of a sealed value's envelope (`{"sealed", "key", "nonce", "data"}`): a
/// payload search for one of them alone (`data.key = k1`) matches envelopes, which are
/// no payload.
const ENVELOPE_KEYS: [&str; 4] = ["sealed", "key", "nonce", "data"];

impl Found {
    /// The rows to show.
    pub(crate) fn rows(&self) -> &[JobSummary] {
        match self {
            Found::Page(rows, _) => rows,
            Found::Search(scan, _) => &scan.matches,
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
    let mut scan = queue.scan_jobs(listing.state, filter, &limits).await?;
    let envelopes = match filter {
        JobFilter::DataField { path, .. } if ENVELOPE_KEYS.contains(&path.as_str()) => {
            leave_out_sealed(queue, &mut scan.matches).await?
        }
        _ => 0,
    };
    Ok(Found::Search(scan, envelopes))
}

/// Leaves the sealed jobs out of `matches` (a page's worth at most: one read each, for a
/// search that has just read thousands), and says how many there were. A match whose id
/// was cut, or that is gone, is kept: nothing says it is sealed.
async fn leave_out_sealed(
    queue: &Queue<serde_json::Value>,
    matches: &mut Vec<JobSummary>,
) -> Result<usize, queue_core::Error> {
    let reads = matches.iter().map(|row| async move {
        if row.id_clipped {
            return Ok(false);
        }
        let job = queue.get_job(&row.id).await?;
        // The payload alone: a sealed return value does not make the payload sealed.
        Ok::<_, queue_core::Error>(job.is_some_and(|mut job| {
            job.return_value = None;
            job.sealed_with().is_some()
        }))
    });
    let sealed = try_join_all(reads).await?;
    let before = matches.len();
    let mut sealed = sealed.into_iter();
    matches.retain(|_| !sealed.next().unwrap_or(false));
    Ok(before - matches.len())
}
