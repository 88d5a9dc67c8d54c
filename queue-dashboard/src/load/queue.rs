//! What a queue page shows: its counts, its pause flag, and its listing (three reads at
//! once).

use queue_core::{job::JobCounts, Queue};

use super::listing::{self, Found};
use crate::query::Listing;

/// A queue page's data.
pub(crate) struct QueuePage {
    pub(crate) counts: JobCounts,
    pub(crate) paused: bool,
    pub(crate) found: Found,
}

/// Reads `queue`'s counts, pause flag and `listing`.
pub(crate) async fn read(
    queue: &Queue<serde_json::Value>,
    listing: &Listing,
) -> Result<QueuePage, queue_core::Error> {
    let (counts, paused, found) = tokio::try_join!(
        queue.get_job_counts(),
        queue.is_paused(),
        listing::read(queue, listing),
    )?;
    Ok(QueuePage {
        counts,
        paused,
        found,
    })
}
