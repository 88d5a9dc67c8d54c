//! What the overview shows: Redis's health, then per queue a fixed handful of commands
//! (whether it has groups: a page of one group).

use queue_core::{
    health::RedisInfo, job::JobCounts, queue::GlobalLimits, queue::PerMinuteSeries, QueueApp,
};

use crate::limits::MINUTES;

/// Redis's health and every queue's figures.
pub(crate) struct Overview {
    /// `None` when the provider hides `INFO`: the health line is left empty, not the
    /// page.
    pub(crate) redis: Option<RedisInfo>,
    pub(crate) queues: Vec<QueueRow>,
}

/// What the overview shows of one queue.
pub(crate) struct QueueRow {
    pub(crate) name: String,
    pub(crate) counts: JobCounts,
    pub(crate) paused: bool,
    pub(crate) workers: usize,
    pub(crate) limits: GlobalLimits,
    pub(crate) schedulers: u64,
    pub(crate) completed: Vec<u64>,
    pub(crate) failed: Vec<u64>,
    pub(crate) oldest_waiting: Option<u64>,
    /// Whether the queue has groups ([`Queue::groups`](queue_core::Queue::groups) lists
    /// one).
    pub(crate) grouped: bool,
}

/// Reads every queue the app knows, then Redis's `INFO`.
pub(crate) async fn read(app: &QueueApp) -> Result<Overview, queue_core::Error> {
    let mut queues = Vec::new();
    for name in app.known_queues() {
        // Known by construction: `Shared::queue`'s check would list them all again.
        let queue = app.queue::<serde_json::Value>(&name)?;
        let (
            counts,
            paused,
            workers,
            limits,
            schedulers,
            completed,
            failed,
            oldest_waiting,
            groups,
        ) = tokio::try_join!(
            queue.get_job_counts(),
            queue.is_paused(),
            queue.get_workers(),
            queue.get_global_limits(),
            queue.scheduler_count(),
            queue.get_per_minute(PerMinuteSeries::Completed, MINUTES),
            queue.get_per_minute(PerMinuteSeries::Failed, MINUTES),
            queue.get_oldest_waiting(),
            queue.groups(None, 1),
        )?;
        queues.push(QueueRow {
            name,
            counts,
            paused,
            workers: workers.len(),
            limits,
            schedulers,
            completed,
            failed,
            oldest_waiting,
            grouped: !groups.groups.is_empty(),
        });
    }
    let redis = app.redis_info().await.ok();
    Ok(Overview { redis, queues })
}
