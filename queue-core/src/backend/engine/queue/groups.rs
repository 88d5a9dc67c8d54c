//! A queue's groups: pause, resume, own limits, listing (engine change 21's scripts).

use super::EngineQueue;
use crate::backend::engine::convert::millis;
use crate::error::Error;
use crate::group::{GroupInfo, GroupLimits};

/// Our limits as the engine's.
pub(crate) fn limits_to_engine(limits: GroupLimits) -> bullmq::groups::GroupLimits {
    bullmq::groups::GroupLimits {
        concurrency: limits.get_concurrency(),
        rate: limits
            .get_rate()
            .map(|(max, per)| bullmq::groups::GroupRate {
                max,
                duration_ms: millis(per).max(1),
            }),
    }
}

fn limits_from_engine(limits: bullmq::groups::GroupLimits) -> GroupLimits {
    let mut ours = GroupLimits::new();
    if let Some(c) = limits.concurrency {
        ours = ours.concurrency(c);
    }
    if let Some(rate) = limits.rate {
        ours = ours.rate(rate.max, std::time::Duration::from_millis(rate.duration_ms));
    }
    ours
}

impl EngineQueue {
    pub(crate) async fn pause_group(&self, group: &str) -> Result<(), Error> {
        self.inner
            .pause_group(group)
            .await
            .map_err(|e| self.error(e))
    }

    pub(crate) async fn resume_group(&self, group: &str) -> Result<(), Error> {
        self.inner
            .resume_group(group)
            .await
            .map_err(|e| self.error(e))
    }

    pub(crate) async fn set_group_limits(
        &self,
        group: &str,
        limits: GroupLimits,
    ) -> Result<(), Error> {
        self.inner
            .set_group_limits(group, limits_to_engine(limits))
            .await
            .map_err(|e| self.error(e))
    }

    pub(crate) async fn groups(
        &self,
        after: Option<&str>,
        count: usize,
    ) -> Result<Vec<GroupInfo>, Error> {
        let page = self
            .inner
            .list_groups(after, count)
            .await
            .map_err(|e| self.error(e))?;
        Ok(page
            .into_iter()
            .map(|g| GroupInfo {
                id: g.id,
                waiting: g.waiting,
                active: g.active,
                paused: g.paused,
                limits: limits_from_engine(g.limits),
            })
            .collect())
    }
}
