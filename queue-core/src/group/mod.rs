//! Fair groups: the limits each group of a queue runs under, and what an operator
//! reads of a queue's groups. The guide's page "Fair groups" tells the whole story;
//! the design is in `docs/architecture.md`.

use std::time::Duration;

use crate::error::Error;

/// The most groups one page of [`Queue::groups`](crate::Queue::groups) returns.
pub const MAX_GROUP_PAGE: usize = 1_000;

/// How each group of a queue runs, across every worker process: at most
/// `concurrency` of its jobs at once, at most `max` started per `per`.
///
/// Given to a processor ([`Processor::groups`](crate::Processor::groups)), they are
/// the queue's limits for every group; [`Queue::set_group_limits`](crate::Queue::set_group_limits)
/// gives one group its own. A group at its limit does not hold up the others.
///
/// ```
/// use std::time::Duration;
/// use queue_core::group::GroupLimits;
///
/// let limits = GroupLimits::new().concurrency(2).rate(10, Duration::from_secs(1));
/// assert_eq!(limits.get_concurrency(), Some(2));
/// assert_eq!(limits.get_rate(), Some((10, Duration::from_secs(1))));
/// assert!(GroupLimits::new().concurrency(0).validate().is_err());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[must_use = "group limits do nothing until given to a processor or a queue"]
pub struct GroupLimits {
    concurrency: Option<u32>,
    rate: Option<(u64, Duration)>,
}

impl GroupLimits {
    /// No limit: groups still take turns.
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `concurrency` active jobs per group, over all workers.
    pub fn concurrency(mut self, concurrency: u32) -> Self {
        self.concurrency = Some(concurrency);
        self
    }

    /// At most `max` jobs of a group started per `per`, over all workers.
    pub fn rate(mut self, max: u64, per: Duration) -> Self {
        self.rate = Some((max, per));
        self
    }

    /// The concurrency, if limited.
    pub fn get_concurrency(&self) -> Option<u32> {
        self.concurrency
    }

    /// The rate limit, if any: starts per window.
    pub fn get_rate(&self) -> Option<(u64, Duration)> {
        self.rate
    }

    /// A concurrency of at least 1; a rate of at least one start per at least a
    /// millisecond.
    pub fn validate(&self) -> Result<(), Error> {
        if self.concurrency == Some(0) {
            return Err(Error::invalid(
                "group concurrency",
                "must be at least 1 (pause a group to stop it)",
            ));
        }
        if let Some((max, per)) = self.rate {
            if max == 0 {
                return Err(Error::invalid(
                    "group rate",
                    "must allow at least one start per window (pause a group to stop it)",
                ));
            }
            if per < Duration::from_millis(1) {
                return Err(Error::invalid(
                    "group rate",
                    "the window must be at least a millisecond",
                ));
            }
        }
        Ok(())
    }
}

/// One group of a queue, as [`Queue::groups`](crate::Queue::groups) lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupInfo {
    /// The group's id; `""` holds the queue's jobs added without a group.
    pub id: String,
    /// Its jobs waiting their turn (a job removed while waiting may count until a
    /// worker passes over it).
    pub waiting: u64,
    /// Its jobs running now, as its slots count them: only while a concurrency limit
    /// applies to the group (0 without one).
    pub active: u64,
    /// Whether it is paused ([`Queue::pause_group`](crate::Queue::pause_group)).
    pub paused: bool,
    /// Its own limits, which win over the queue's.
    pub limits: GroupLimits,
}

/// One page of a queue's groups, ordered by id.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupPage {
    /// The groups of this page.
    pub groups: Vec<GroupInfo>,
    /// Where the next page starts (give it to the next call), `None` after the last.
    pub next: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_that_stop_a_group_are_refused() {
        assert!(GroupLimits::new().validate().is_ok());
        assert!(GroupLimits::new().concurrency(1).validate().is_ok());
        assert!(GroupLimits::new().concurrency(0).validate().is_err());
        assert!(GroupLimits::new()
            .rate(0, Duration::from_secs(1))
            .validate()
            .is_err());
        assert!(GroupLimits::new()
            .rate(1, Duration::from_micros(10))
            .validate()
            .is_err());
    }
}
