//! Queue depth for a scrape: BullMQ's counts of each queue, read at most once per
//! [`DEPTH_CACHE_FOR`], so that a scrape every second costs Redis one round trip per
//! queue however many scrapers there are.

use std::time::Instant;

use super::{Metrics, StateLabels, DEPTH_CACHE_FOR};
use crate::error::Error;
use crate::job::{JobCounts, JobState};
use crate::queue::Queue;

/// Each state's count under BullMQ's name (Node's `getJobCounts` and
/// `exportPrometheusMetrics` use the same), in the order the scrape lists them.
fn states(counts: &JobCounts) -> [(&'static str, u64); 7] {
    [
        JobState::Active,
        JobState::Completed,
        JobState::Delayed,
        JobState::Failed,
        JobState::Prioritized,
        JobState::Waiting,
        JobState::WaitingChildren,
    ]
    .map(|state| (state.as_str(), counts.of(state)))
}

impl Metrics {
    /// Reads the counts of every one of `queues` whose figures are older than
    /// [`DEPTH_CACHE_FOR`], in parallel.
    pub(super) async fn refresh_depth(
        &self,
        queues: &[Queue<serde_json::Value>],
    ) -> Result<(), Error> {
        let now = Instant::now();
        let due: Vec<&Queue<serde_json::Value>> = {
            let cache = self.cache();
            queues
                .iter()
                .filter(|q| {
                    cache
                        .read_at
                        .get(q.name())
                        .is_none_or(|at| now.duration_since(*at) >= DEPTH_CACHE_FOR)
                })
                .collect()
        };
        let reads = due
            .iter()
            .map(|queue| async move { (queue.name(), queue.get_job_counts().await) });
        let mut last_error = None;
        let mut read_any = due.is_empty();
        for outcome in futures::future::join_all(reads).await {
            match outcome {
                (queue, Ok(counts)) => {
                    read_any = true;
                    self.set_depth(queue, &counts);
                    self.cache().read_at.insert(queue.to_owned(), now);
                }
                (queue, Err(e)) => {
                    tracing::warn!(%queue, error = %e, "metrics: cannot read the queue's counts");
                    last_error = Some(e);
                }
            }
        }
        match last_error {
            Some(e) if !read_any => Err(e),
            _ => Ok(()),
        }
    }

    fn set_depth(&self, queue: &str, counts: &JobCounts) {
        for (state, n) in states(counts) {
            let labels = StateLabels {
                queue: queue.to_owned(),
                state: state.to_owned(),
            };
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            self.inner.depth.get_or_create(&labels).set(n);
            self.inner.bullmq_depth.get_or_create(&labels).set(n);
        }
    }
}
