//! Job options: the builder a producer fills and the checks that refuse bad values at
//! `add`; and the options of a queue's worker.

mod backoff;
mod dedup;
pub(crate) mod job_id;
mod keep;
mod schedule;
mod strategies;
mod worker;

use std::time::Duration;

pub use backoff::{Backoff, BackoffContext};
pub use dedup::Deduplication;
pub use job_id::{could_be_job_id, MAX_JOB_ID_BYTES};
pub use keep::Retention;

/// The old name of [`Retention`].
#[deprecated(since = "0.2.0", note = "renamed `Retention`")]
pub type Keep = Retention;
pub use schedule::{MissedRuns, Schedule};
pub(crate) use strategies::{BackoffFn, BackoffRegistry};
pub(crate) use worker::{Batching, WorkerOptions, MAX_BATCH_SIZE};

use crate::error::Error;
use job_id::validate_job_id;

/// The longest group id, in bytes: ids are part of Redis keys, and a tenant id or a
/// name fits.
pub const MAX_GROUP_BYTES: usize = 128;

/// A group id is not empty, fits [`MAX_GROUP_BYTES`] and has no control characters
/// (it is shown in listings and logs).
pub(crate) fn validate_group(group: &str) -> Result<(), Error> {
    if group.is_empty() {
        return Err(Error::invalid("group", "cannot be empty"));
    }
    if group.len() > MAX_GROUP_BYTES {
        return Err(Error::invalid(
            "group",
            format!("{} bytes is longer than {MAX_GROUP_BYTES}", group.len()),
        ));
    }
    if group.chars().any(char::is_control) {
        return Err(Error::invalid("group", "cannot hold control characters"));
    }
    Ok(())
}

/// The highest priority number BullMQ accepts (2^21 - 1). `1` is the most urgent.
pub const MAX_PRIORITY: u32 = 2_097_151;

/// The longest delay a job takes: ten years (365-day years). A longer one is a mistake
/// (a unit mixed up, a negative number cast to unsigned), and BullMQ could not keep it
/// anyway: the due time travels as a 64-bit signed integer and is kept as a Redis score,
/// so `u64::MAX` milliseconds was stored as a delay of -1, due at once.
pub const MAX_DELAY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Options for one job: retries, backoff, delay, priority, id, retention and more.
///
/// Every setter is optional; unset values fall back to the app's default job options
/// ([`QueueAppBuilder::default_job_options`](crate::QueueAppBuilder::default_job_options)),
/// then to BullMQ's defaults (one attempt, keep every finished job).
///
/// ```
/// use std::time::Duration;
/// use queue_core::{Backoff, JobOptions, Retention};
///
/// let opts = JobOptions::new()
///     .job_id("welcome-42")                 // dedup: the same id never makes a second job
///     .attempts(5)
///     .backoff(Backoff::exponential(Duration::from_secs(3)))
///     .remove_on_complete(Retention::Last(100))
///     .remove_on_fail(Retention::Last(1000));
/// assert!(opts.validate().is_ok());
/// assert!(JobOptions::new().attempts(0).validate().is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use = "job options do nothing until they are given to an add"]
pub struct JobOptions {
    pub(crate) attempts: Option<u32>,
    pub(crate) backoff: Option<Backoff>,
    pub(crate) delay: Option<Duration>,
    pub(crate) priority: Option<u32>,
    pub(crate) lifo: bool,
    pub(crate) job_id: Option<String>,
    pub(crate) remove_on_complete: Option<Retention>,
    pub(crate) remove_on_fail: Option<Retention>,
    pub(crate) deduplication: Option<Deduplication>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) trace: Option<crate::trace::TraceContext>,
    pub(crate) stack_trace_limit: Option<u32>,
    pub(crate) group: Option<String>,
    /// A scheduled run that starts later than this after its time is skipped
    /// ([`MissedRuns::Skip`]); set by `upsert_scheduler` only.
    pub(crate) skip_late: Option<Duration>,
}

impl JobOptions {
    /// No options set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Total attempts, the first one included (`1` means no retry). Must be at least 1.
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = Some(attempts);
        self
    }

    /// Wait between attempts.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// Run no earlier than `delay` from now.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// Priority from 1 (most urgent) to [`MAX_PRIORITY`]; 0 means none. As in BullMQ,
    /// jobs without a priority run before every prioritized job.
    pub fn priority(mut self, priority: u32) -> Self {
        self.priority = Some(priority);
        self
    }

    /// Run this job before the jobs already waiting (last in, first out).
    pub fn lifo(mut self) -> Self {
        self.lifo = true;
        self
    }

    /// A custom id. Adding a job whose id already exists adds nothing and reports
    /// a duplicate. BullMQ's rules apply: not empty, not an integer, no `:`.
    pub fn job_id(mut self, id: impl Into<String>) -> Self {
        self.job_id = Some(id.into());
        self
    }

    /// Which completed jobs Redis keeps.
    pub fn remove_on_complete(mut self, keep: Retention) -> Self {
        self.remove_on_complete = Some(keep);
        self
    }

    /// Which failed jobs Redis keeps.
    pub fn remove_on_fail(mut self, keep: Retention) -> Self {
        self.remove_on_fail = Some(keep);
        self
    }

    /// BullMQ deduplication on an id separate from the job id.
    pub fn deduplication(mut self, dedup: Deduplication) -> Self {
        self.deduplication = Some(dedup);
        self
    }

    /// Fail an attempt that runs longer than this (overrides the processor's timeout).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Puts the job in a group (a tenant, a customer): a grouped worker takes jobs one
    /// group after the other, each group under its own concurrency and rate limit
    /// ([`GroupLimits`](crate::group::GroupLimits)), so one group's backlog does not hold up
    /// another's jobs. Inside a group, priorities and delays keep their meaning.
    /// Stored where BullMQ Pro keeps it (`opts.group.id`), so a Node producer can add
    /// to a group too. While it waits its turn the job is in its group, outside
    /// BullMQ's `wait` (this crate counts it as waiting). At most [`MAX_GROUP_BYTES`]
    /// bytes, not empty.
    ///
    /// ```
    /// use queue_core::JobOptions;
    ///
    /// let opts = JobOptions::new().group("tenant-42").priority(3);
    /// assert_eq!(opts.get_group(), Some("tenant-42"));
    /// assert!(opts.validate().is_ok());
    /// assert!(JobOptions::new().group("").validate().is_err());
    /// ```
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// The job's group, if set.
    pub fn get_group(&self) -> Option<&str> {
        self.group.as_deref()
    }

    /// Ties the job to a trace: the job's attempts continue `context`. Unset, `add`
    /// continues the current [`trace::scope`](crate::trace::scope), if any. Stored
    /// where BullMQ's telemetry keeps it (`tm`), so Node workers continue it too.
    pub fn trace(mut self, context: crate::trace::TraceContext) -> Self {
        self.trace = Some(context);
        self
    }

    /// How many failed attempts' records the job keeps in its `stacktrace`, the newest
    /// (BullMQ's `stackTraceLimit`; 0 keeps none). Unset, the last 10.
    pub fn stack_trace_limit(mut self, limit: u32) -> Self {
        self.stack_trace_limit = Some(limit);
        self
    }

    /// The configured stack trace limit, if set.
    pub fn get_stack_trace_limit(&self) -> Option<u32> {
        self.stack_trace_limit
    }

    /// The trace context, if set.
    pub fn get_trace(&self) -> Option<&crate::trace::TraceContext> {
        self.trace.as_ref()
    }

    /// The configured attempts, if set.
    pub fn get_attempts(&self) -> Option<u32> {
        self.attempts
    }

    /// The configured backoff, if set.
    pub fn get_backoff(&self) -> Option<&Backoff> {
        self.backoff.as_ref()
    }

    /// The configured delay, if set.
    pub fn get_delay(&self) -> Option<Duration> {
        self.delay
    }

    /// The configured priority, if set.
    pub fn get_priority(&self) -> Option<u32> {
        self.priority
    }

    /// The custom job id, if set.
    pub fn get_job_id(&self) -> Option<&str> {
        self.job_id.as_deref()
    }

    /// The per-job timeout, if set.
    pub fn get_timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Checks every option against BullMQ's rules. [`Queue::add`](crate::Queue::add)
    /// calls this; calling it yourself lets you refuse a request before doing other work.
    pub fn validate(&self) -> Result<(), Error> {
        if self.attempts == Some(0) {
            return Err(Error::invalid(
                "attempts",
                "must be at least 1 (it counts the first run; 1 means no retry)",
            ));
        }
        if let Some(p) = self.priority {
            if p > MAX_PRIORITY {
                return Err(Error::invalid(
                    "priority",
                    format!("{p} is out of range; BullMQ accepts 0 to {MAX_PRIORITY}"),
                ));
            }
        }
        if let Some(id) = &self.job_id {
            validate_job_id(id)?;
        }
        if let Some(delay) = self.delay {
            if delay > MAX_DELAY {
                return Err(Error::invalid(
                    "delay",
                    format!(
                        "{} ms is longer than the longest delay, {} ms (ten years)",
                        delay.as_millis(),
                        MAX_DELAY.as_millis()
                    ),
                ));
            }
        }
        if let Some(d) = &self.deduplication {
            if d.id.is_empty() {
                return Err(Error::invalid("deduplication", "the id cannot be empty"));
            }
            if d.ttl == Some(Duration::ZERO) {
                return Err(Error::invalid(
                    "deduplication",
                    "a ttl must be longer than zero",
                ));
            }
        }
        if self.timeout == Some(Duration::ZERO) {
            return Err(Error::invalid("timeout", "must be longer than zero"));
        }
        if let Some(group) = &self.group {
            validate_group(group)?;
        }
        if let Some(Backoff::Custom(name)) = &self.backoff {
            if name.is_empty() || name == "fixed" || name == "exponential" {
                return Err(Error::invalid(
                    "backoff",
                    format!("`{name}` cannot name a custom strategy; use Backoff::fixed or Backoff::exponential"),
                ));
            }
        }
        Ok(())
    }

    /// Whether a job with these options may turn out a duplicate: it has a job id or a
    /// deduplication id, which another job may hold already.
    pub(crate) fn may_be_duplicate(&self) -> bool {
        self.job_id.is_some() || self.deduplication.is_some()
    }

    /// These options, with every unset value taken from `defaults`.
    pub(crate) fn or_defaults(mut self, defaults: &JobOptions) -> JobOptions {
        // Moved out, not copied: every add passes here.
        let (job_id, deduplication) = (self.job_id.take(), self.deduplication.take());
        let group = self.group.take();
        // The job hangs below the add's span, or the current scope.
        let trace = self.trace.take().or_else(crate::trace::for_new_job);
        JobOptions {
            job_id,
            deduplication,
            trace,
            group,
            ..self.over(defaults)
        }
    }

    /// The defaults these options make over `base` (a queue's over the app's): each
    /// unset value from `base`. Ids, trace contexts, groups and a scheduler's grace are
    /// never defaults.
    pub(crate) fn over(self, base: &JobOptions) -> JobOptions {
        JobOptions {
            attempts: self.attempts.or(base.attempts),
            backoff: self.backoff.or_else(|| base.backoff.clone()),
            delay: self.delay.or(base.delay),
            priority: self.priority.or(base.priority),
            lifo: self.lifo || base.lifo,
            job_id: None,
            remove_on_complete: self.remove_on_complete.or(base.remove_on_complete),
            remove_on_fail: self.remove_on_fail.or(base.remove_on_fail),
            deduplication: None,
            timeout: self.timeout.or(base.timeout),
            trace: None,
            stack_trace_limit: self.stack_trace_limit.or(base.stack_trace_limit),
            group: None,
            skip_late: self.skip_late,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused_option(opts: JobOptions) -> &'static str {
        match opts.validate() {
            Err(Error::InvalidOption { option, .. }) => option,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn each_bad_option_is_named() {
        assert_eq!(refused_option(JobOptions::new().attempts(0)), "attempts");
        assert_eq!(
            refused_option(JobOptions::new().priority(MAX_PRIORITY + 1)),
            "priority"
        );
        assert_eq!(refused_option(JobOptions::new().job_id("a:b")), "job_id");
        assert_eq!(
            refused_option(JobOptions::new().timeout(Duration::ZERO)),
            "timeout"
        );
        assert_eq!(
            refused_option(JobOptions::new().deduplication(Deduplication::new(""))),
            "deduplication"
        );
        assert_eq!(
            refused_option(JobOptions::new().backoff(Backoff::custom("fixed"))),
            "backoff"
        );
        assert_eq!(
            refused_option(JobOptions::new().delay(Duration::from_millis(u64::MAX))),
            "delay"
        );
        assert_eq!(
            refused_option(JobOptions::new().delay(MAX_DELAY + Duration::from_millis(1))),
            "delay"
        );
        assert_eq!(refused_option(JobOptions::new().group("")), "group");
        assert_eq!(
            refused_option(JobOptions::new().group("g".repeat(MAX_GROUP_BYTES + 1))),
            "group"
        );
        assert_eq!(refused_option(JobOptions::new().group("a\nb")), "group");
    }

    #[test]
    fn boundary_values_pass() {
        let opts = JobOptions::new()
            .attempts(1)
            .priority(MAX_PRIORITY)
            .priority(0)
            .delay(MAX_DELAY);
        assert!(opts.validate().is_ok());
    }

    #[test]
    fn defaults_fill_only_unset_values() {
        let defaults = JobOptions::new()
            .attempts(3)
            .priority(5)
            .timeout(Duration::from_secs(9));
        let merged = JobOptions::new().attempts(7).or_defaults(&defaults);
        assert_eq!(merged.attempts, Some(7));
        assert_eq!(merged.priority, Some(5));
        assert_eq!(merged.timeout, Some(Duration::from_secs(9)));
    }
}
