//! When a job scheduler adds its job.

use std::time::Duration;

/// When a scheduler adds its job.
///
/// ```
/// use queue_core::options::Schedule;
/// let daily = Schedule::cron("5 0 * * *").tz("Europe/Paris"); // 00:05 Paris time
/// # let _ = daily;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a schedule does nothing until it is given to `upsert_scheduler`"]
pub struct Schedule {
    pub(crate) cron: Option<String>,
    pub(crate) every: Option<Duration>,
    pub(crate) tz: Option<String>,
}

impl Schedule {
    /// A cron pattern, five fields (minute first) or six (seconds first).
    pub fn cron(pattern: impl Into<String>) -> Self {
        Schedule {
            cron: Some(pattern.into()),
            every: None,
            tz: None,
        }
    }

    /// Every `interval`.
    pub fn every(interval: Duration) -> Self {
        Schedule {
            cron: None,
            every: Some(interval),
            tz: None,
        }
    }

    /// The IANA time zone the cron pattern is read in (default UTC).
    pub fn tz(mut self, tz: impl Into<String>) -> Self {
        self.tz = Some(tz.into());
        self
    }
}
