//! Queue depth for a scrape: BullMQ's counts of each queue, read at most once per
//! [`DEPTH_CACHE_FOR`], so that a scrape every second costs Redis one round trip per
//! queue however many scrapers there are.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::{Metrics, StateLabels};
use crate::error::Error;
use crate::job::{JobCounts, JobState};
use crate::QueueApp;

/// How long a queue's counts serve scrapes before they are read again.
pub const DEPTH_CACHE_FOR: Duration = Duration::from_secs(1);

/// When each queue's counts were last read.
#[derive(Debug, Default)]
pub(super) struct DepthCache {
    read_at: HashMap<String, Instant>,
}

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
    /// Reads the counts of every queue the app knows whose figures are older than
    /// [`DEPTH_CACHE_FOR`], in parallel.
    pub(super) async fn refresh_depth(&self, app: &QueueApp) -> Result<(), Error> {
        let now = Instant::now();
        let due: Vec<String> = {
            let cache = self.cache();
            app.known_queues()
                .into_iter()
                .filter(|q| {
                    cache
                        .read_at
                        .get(q)
                        .is_none_or(|at| now.duration_since(*at) >= DEPTH_CACHE_FOR)
                })
                .collect()
        };
        let reads = due.iter().map(|queue| async move {
            let counts = app
                .queue::<serde_json::Value>(queue)?
                .get_job_counts()
                .await;
            Ok::<_, Error>((queue, counts))
        });
        let mut last_error = None;
        let mut read_any = due.is_empty();
        for outcome in futures::future::join_all(reads).await {
            match outcome? {
                (queue, Ok(counts)) => {
                    read_any = true;
                    self.set_depth(queue, &counts);
                    self.cache().read_at.insert(queue.clone(), now);
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
