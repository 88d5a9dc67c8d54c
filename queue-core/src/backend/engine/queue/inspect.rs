//! What an operator inspects: workers, global limits, schedulers, per-minute figures.

use std::time::Duration;

use super::EngineQueue;
use crate::error::Error;
use crate::job::{ChildKey, FailedChild};
use crate::snapshot::{
    ChildJob, Children, GlobalLimits, PerMinuteSeries, SchedulerInfo, WorkerInfo,
};

impl EngineQueue {
    pub(crate) async fn get_workers(&self) -> Result<Vec<WorkerInfo>, Error> {
        let clients = self.inner.get_workers().await.map_err(|e| self.error(e))?;
        let seconds = |client: &std::collections::HashMap<String, String>, field: &str| {
            Duration::from_secs(client.get(field).and_then(|v| v.parse().ok()).unwrap_or(0))
        };
        Ok(clients
            .iter()
            .map(|client| {
                let connection = client.get("rawname").cloned().unwrap_or_default();
                let name = connection
                    .split_once(":w:")
                    .map(|(_, name)| name.to_owned());
                WorkerInfo {
                    name,
                    connection,
                    addr: client.get("addr").cloned().unwrap_or_default(),
                    age: seconds(client, "age"),
                    idle: seconds(client, "idle"),
                }
            })
            .collect())
    }

    pub(crate) async fn get_global_limits(&self) -> Result<GlobalLimits, Error> {
        let (concurrency, rate_limit) = tokio::try_join!(
            self.inner.get_global_concurrency(),
            self.inner.get_global_rate_limit(),
        )
        .map_err(|e| self.error(e))?;
        Ok(GlobalLimits {
            concurrency,
            rate_limit: rate_limit.map(|(max, ms)| (max, Duration::from_millis(ms))),
        })
    }

    pub(crate) async fn get_schedulers(
        &self,
        start: i64,
        end: i64,
    ) -> Result<Vec<SchedulerInfo>, Error> {
        let to_isize = |n: i64| isize::try_from(n).unwrap_or(isize::MAX);
        let schedulers = self
            .inner
            .get_job_schedulers(to_isize(start), to_isize(end), true)
            .await
            .map_err(|e| self.error(e))?;
        Ok(schedulers.into_iter().map(scheduler_info).collect())
    }

    pub(crate) async fn get_scheduler(&self, id: &str) -> Result<Option<SchedulerInfo>, Error> {
        let scheduler = self
            .inner
            .get_job_scheduler(id)
            .await
            .map_err(|e| self.error(e))?;
        Ok(scheduler.map(scheduler_info))
    }

    pub(crate) async fn get_children(&self, id: &str, limit: usize) -> Result<Children, Error> {
        // Most jobs are no parents: one command tells, before the three reads.
        let key = self.job_key(id);
        let kinds = ["dependencies", "processed", "failed", "unsuccessful"];
        let existing: u64 = self
            .conn
            .query(redis::cmd("EXISTS").arg(&kinds.map(|kind| format!("{key}:{kind}"))[..]))
            .await?;
        if existing == 0 {
            return Ok(Children::default());
        }
        let end = i64::try_from(limit - 1).unwrap_or(i64::MAX);
        let (pending, processed, (failed, failed_total)) = tokio::try_join!(
            async {
                self.inner
                    .get_dependencies(id, "pending", 0, end)
                    .await
                    .map_err(|e| self.error(e))
            },
            async {
                self.inner
                    .get_dependencies(id, "processed", 0, end)
                    .await
                    .map_err(|e| self.error(e))
            },
            self.failed_children(id, limit),
        )?;
        let child = |item: bullmq::DependencyItem| {
            let ChildKey { queue, id } = ChildKey::from_redis_key(&item.id);
            ChildJob {
                queue,
                id,
                return_value: item.v,
            }
        };
        Ok(Children {
            pending_total: pending.total,
            pending: pending.items.into_iter().map(child).collect(),
            processed_total: processed.total,
            processed: processed.items.into_iter().map(child).collect(),
            failed,
            failed_total,
        })
    }

    /// Up to `limit` failed children of parent `id`, and how many there are. BullMQ keeps
    /// them in two places: the `failed` hash (child key -> reason) for the failures the
    /// parent may pass, and the `unsuccessful` set for the one that failed the parent,
    /// whose reason is on the child.
    async fn failed_children(
        &self,
        id: &str,
        limit: usize,
    ) -> Result<(Vec<FailedChild>, u64), Error> {
        let key = self.job_key(id);
        let mut pipe = redis::pipe();
        pipe.cmd("HSCAN")
            .arg(format!("{key}:failed"))
            .arg(0)
            .arg("COUNT")
            .arg(limit);
        pipe.cmd("HLEN").arg(format!("{key}:failed"));
        pipe.cmd("ZRANGE")
            .arg(format!("{key}:unsuccessful"))
            .arg(0)
            .arg(limit - 1);
        pipe.cmd("ZCARD").arg(format!("{key}:unsuccessful"));
        type Scan = (String, Vec<(String, String)>);
        let ((_, passed), passed_total, failing, failing_total): (Scan, u64, Vec<String>, u64) =
            self.conn.pipeline(&pipe).await?;
        let mut failed: Vec<FailedChild> = passed
            .into_iter()
            .take(limit)
            .map(|(child, reason)| FailedChild::new(ChildKey::from_redis_key(&child), reason))
            .collect();
        if !failing.is_empty() {
            let mut reasons = redis::pipe();
            for child in &failing {
                reasons.cmd("HGET").arg(child).arg("failedReason");
            }
            let reasons: Vec<Option<String>> = self.conn.pipeline(&reasons).await?;
            failed.extend(failing.iter().zip(reasons).map(|(child, reason)| {
                FailedChild::new(ChildKey::from_redis_key(child), reason.unwrap_or_default())
            }));
        }
        failed.truncate(limit);
        Ok((failed, passed_total + failing_total))
    }

    pub(crate) async fn get_per_minute(
        &self,
        outcome: PerMinuteSeries,
        minutes: usize,
    ) -> Result<Vec<u64>, Error> {
        let kind = match outcome {
            PerMinuteSeries::Completed => "completed",
            PerMinuteSeries::Failed => "failed",
        };
        let end = i64::try_from(minutes.saturating_sub(1)).unwrap_or(i64::MAX);
        let metrics = self
            .inner
            .get_metrics(kind, 0, end)
            .await
            .map_err(|e| self.error(e))?;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Ok(with_current_minute(&metrics, minutes, now_ms))
    }
}

/// BullMQ's per-minute list with the minute still being counted in front. BullMQ pushes
/// a minute's count only when a job finishes in a later minute; until then it is the
/// running `count` less `prevCount`, and it belongs to the minute of `prevTS` (the
/// first job of each minute moves `prevTS`). Minutes since, with nothing finished, are
/// zeros. Nothing recorded yet (no `prevTS`): the list as it is (empty).
fn with_current_minute(metrics: &bullmq::types::Metrics, minutes: usize, now_ms: u64) -> Vec<u64> {
    let meta = &metrics.meta;
    if meta.prev_ts == 0 {
        return metrics.data.clone();
    }
    let idle = usize::try_from((now_ms / 60_000).saturating_sub(meta.prev_ts / 60_000))
        .unwrap_or(usize::MAX)
        .min(minutes);
    let mut series = vec![0; idle];
    series.push(meta.count.saturating_sub(meta.prev_count));
    series.extend(&metrics.data);
    series.truncate(minutes);
    series
}

fn scheduler_info(s: bullmq::job_scheduler::JobSchedulerJson) -> SchedulerInfo {
    SchedulerInfo {
        id: s.key,
        job_name: s.name,
        pattern: s.pattern,
        every: s.every.map(Duration::from_millis),
        tz: s.tz,
        next_run_ms: s.next,
        iterations: s.iteration_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(count: u64, prev_ts: u64, prev_count: u64, data: &[u64]) -> bullmq::types::Metrics {
        bullmq::types::Metrics {
            meta: bullmq::types::MetricsMeta {
                count,
                prev_ts,
                prev_count,
            },
            data: data.to_vec(),
            count: data.len() as u64,
        }
    }

    #[test]
    fn the_minute_being_counted_comes_first() {
        let minute = 60_000;
        // Three jobs this minute, none pushed yet.
        assert_eq!(
            with_current_minute(&metrics(3, 10 * minute, 0, &[]), 60, 10 * minute + 5),
            [3]
        );
        // Two minutes later with nothing finished since: two idle minutes, then that one.
        assert_eq!(
            with_current_minute(&metrics(7, 10 * minute, 4, &[4]), 60, 12 * minute + 1),
            [0, 0, 3, 4]
        );
        assert_eq!(
            with_current_minute(&metrics(7, 10 * minute, 4, &[4]), 2, 12 * minute),
            [0, 0]
        );
        assert!(with_current_minute(&metrics(0, 0, 0, &[]), 60, minute).is_empty());
    }
}
