//! A queue's job schedulers, soonest first: one read of at most
//! [`SCHEDULERS_SHOWN`].

use queue_core::queue::SchedulerInfo;
use queue_core::Queue;

use crate::limits::SCHEDULERS_SHOWN;

/// Reads `queue`'s schedulers.
pub(crate) async fn read(
    queue: &Queue<serde_json::Value>,
) -> Result<Vec<SchedulerInfo>, queue_core::Error> {
    queue.get_schedulers(0..SCHEDULERS_SHOWN).await
}
