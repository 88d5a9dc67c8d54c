//! Conversions between our types and the engine's, both ways.

use std::sync::Arc;
use std::time::Duration;

use bullmq::types::{BackoffStrategy, KeepJobs, RemoveOnFinish};

use crate::error::Error;
use crate::job::{JobCounts, JobInfo, JobMeta, JobState};
use crate::options::{Backoff, Deduplication, JobOptions, Retention};
use crate::trace::TraceContext;

pub(crate) fn engine_error(e: bullmq::Error) -> Error {
    engine_error_in(e, "")
}

/// The engine's error as ours, naming `queue` where the error is about one: a missing
/// job, a locked one, a closed worker and a rate limit each have their own variant (so
/// that they do not answer 503, and `add` does not retry them).
pub(crate) fn engine_error_in(e: bullmq::Error, queue: &str) -> Error {
    let queue = queue.to_owned();
    match e {
        bullmq::Error::JobNotFound(id) => Error::JobNotFound { queue, id },
        bullmq::Error::JobLocked(detail) => Error::Locked {
            queue,
            id: String::new(),
            detail,
        },
        bullmq::Error::JobLockNotExist(id) => Error::Locked {
            queue,
            detail: format!("the lock of job {id} does not exist"),
            id,
        },
        bullmq::Error::WorkerClosed => Error::WorkerClosed { queue },
        bullmq::Error::RateLimited { delay_ms } => Error::RateLimited {
            queue,
            retry_after: Duration::from_millis(delay_ms),
        },
        bullmq::Error::Redis(e) => Error::Redis(Box::new(e)),
        bullmq::Error::ConnectionClosed => Error::Redis("connection closed".into()),
        bullmq::Error::Serialization(source) => Error::Serialize {
            what: "job data",
            source,
        },
        bullmq::Error::Script { code, message } => Error::Script { code, message },
        bullmq::Error::InvalidConfig(reason) => Error::InvalidOption {
            option: "options",
            reason,
        },
        other => Error::Redis(other.to_string().into()),
    }
}

/// Whole milliseconds, saturating at `u64::MAX` (the unit of every BullMQ duration).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(super) fn keep_to_engine(keep: Retention) -> RemoveOnFinish {
    match keep {
        Retention::All => RemoveOnFinish::Bool(false),
        Retention::None => RemoveOnFinish::Bool(true),
        Retention::Last(n) => RemoveOnFinish::Count(n),
        // BullMQ's `age` is in seconds.
        Retention::Age(age) => RemoveOnFinish::Options(KeepJobs {
            age: Some(age.as_secs()),
            count: None,
            limit: None,
        }),
        Retention::LastWithin { count, age } => RemoveOnFinish::Options(KeepJobs {
            age: Some(age.as_secs()),
            count: Some(count),
            limit: None,
        }),
    }
}

fn keep_from_engine(keep: &RemoveOnFinish) -> Retention {
    match keep {
        RemoveOnFinish::Bool(false) => Retention::All,
        RemoveOnFinish::Bool(true) => Retention::None,
        RemoveOnFinish::Count(n) => Retention::Last(*n),
        RemoveOnFinish::Options(k) => match (k.count, k.age) {
            (Some(count), Some(age)) => Retention::LastWithin {
                count,
                age: Duration::from_secs(age),
            },
            (Some(count), None) => Retention::Last(count),
            (None, Some(age)) => Retention::Age(Duration::from_secs(age)),
            (None, None) => Retention::All,
        },
    }
}

fn backoff_to_engine(b: &Backoff) -> BackoffStrategy {
    match b {
        Backoff::Fixed(d) => BackoffStrategy::Fixed(millis(*d)),
        Backoff::Exponential(d) => BackoffStrategy::Exponential(millis(*d)),
        Backoff::Custom(name) => BackoffStrategy::Custom(name.clone()),
    }
}

fn backoff_from_engine(b: &BackoffStrategy) -> Backoff {
    match b {
        BackoffStrategy::Fixed(ms) => Backoff::Fixed(Duration::from_millis(*ms)),
        BackoffStrategy::Exponential(ms) => Backoff::Exponential(Duration::from_millis(*ms)),
        BackoffStrategy::Custom(name) => Backoff::Custom(name.clone()),
    }
}

/// The key under a job's stored options that holds its per-job timeout, in
/// milliseconds: Bull's own name and meaning for it. Node BullMQ has no such option;
/// it keeps the key, as it keeps every key of `opts` it does not know, when it reads
/// and rewrites the job (a retry included).
pub(crate) const TIMEOUT_KEY: &str = "timeout";

/// The key under a scheduled job's stored options that holds how late its run may start
/// ([`MissedRuns::Skip`](crate::options::MissedRuns::Skip)), in milliseconds: in the
/// scheduler's template, so every run carries it. Node BullMQ keeps it as it keeps
/// [`TIMEOUT_KEY`], and ignores it.
pub(crate) const SKIP_LATE_KEY: &str = "skipLate";

/// Our validated options as the engine's, with the job's creation timestamp: BullMQ's
/// own fields, the trace context in BullMQ's telemetry field (`tm`), the timeout under
/// [`TIMEOUT_KEY`] and a scheduler's grace under [`SKIP_LATE_KEY`]. Nothing else is
/// stored for a job.
pub(crate) fn options_to_engine(opts: &JobOptions, timestamp_ms: u64) -> bullmq::JobOptions {
    let mut extensions = std::collections::BTreeMap::new();
    if let Some(timeout) = opts.timeout {
        extensions.insert(TIMEOUT_KEY.to_owned(), millis(timeout).into());
    }
    if let Some(grace) = opts.skip_late {
        extensions.insert(SKIP_LATE_KEY.to_owned(), millis(grace).into());
    }
    let priority = opts.priority.filter(|p| *p > 0);
    if let Some(group) = &opts.group {
        // A grouped job's priority orders it inside its group: kept in the group
        // option, so BullMQ's add leaves the job in `wait` for the group take to
        // adopt (a priority of BullMQ's own would put it in `prioritized`, where
        // no group take looks for new jobs).
        let mut value = serde_json::json!({ "id": group });
        if let Some(p) = priority {
            value["priority"] = p.into();
        }
        extensions.insert(bullmq::groups::GROUP_OPTION.to_owned(), value);
    }
    bullmq::JobOptions {
        attempts: opts.attempts,
        backoff: opts.backoff.as_ref().map(backoff_to_engine),
        delay: opts.delay.map(millis).filter(|d| *d > 0),
        priority: priority.filter(|_| opts.group.is_none()),
        lifo: opts.lifo.then_some(true),
        job_id: opts.job_id.clone(),
        remove_on_complete: opts.remove_on_complete.map(keep_to_engine),
        remove_on_fail: opts.remove_on_fail.map(keep_to_engine),
        deduplication: opts
            .deduplication
            .as_ref()
            .map(|d| bullmq::DeduplicationOptions {
                id: d.id.clone(),
                ttl: d.ttl.map(millis),
                extend: d.extend.then_some(true),
                replace: d.replace.then_some(true),
                keep_last_if_active: None,
            }),
        timestamp: Some(timestamp_ms),
        stack_trace_limit: opts.stack_trace_limit,
        telemetry_metadata: opts.trace.as_ref().map(TraceContext::to_metadata),
        extensions,
        ..Default::default()
    }
}

/// The engine's stored options as ours, whichever producer wrote them. A trace context
/// the producer asked to be omitted (`omc`) is not continued.
pub(crate) fn options_from_engine(opts: &bullmq::JobOptions) -> JobOptions {
    JobOptions {
        attempts: opts.attempts,
        backoff: opts.backoff.as_ref().map(backoff_from_engine),
        delay: opts.delay.filter(|d| *d > 0).map(Duration::from_millis),
        priority: opts
            .priority
            .filter(|p| *p > 0)
            .or_else(|| group_priority(opts)),
        lifo: opts.lifo.unwrap_or(false),
        job_id: opts.job_id.clone(),
        remove_on_complete: opts.remove_on_complete.as_ref().map(keep_from_engine),
        remove_on_fail: opts.remove_on_fail.as_ref().map(keep_from_engine),
        deduplication: opts.deduplication.as_ref().map(|d| Deduplication {
            id: d.id.clone(),
            ttl: d.ttl.map(Duration::from_millis),
            extend: d.extend.unwrap_or(false),
            replace: d.replace.unwrap_or(false),
        }),
        timeout: opts
            .extensions
            .get(TIMEOUT_KEY)
            .and_then(serde_json::Value::as_u64)
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis),
        trace: opts
            .telemetry_metadata
            .as_deref()
            .filter(|_| opts.telemetry_omit_context != Some(true))
            .and_then(TraceContext::from_metadata),
        stack_trace_limit: opts.stack_trace_limit,
        group: bullmq::groups::group_of(opts).map(std::borrow::Cow::into_owned),
        skip_late: opts
            .extensions
            .get(SKIP_LATE_KEY)
            .and_then(serde_json::Value::as_u64)
            .map(Duration::from_millis),
    }
}

/// A grouped job's priority inside its group (`opts.group.priority`).
fn group_priority(opts: &bullmq::JobOptions) -> Option<u32> {
    let group = opts.extensions.get(bullmq::groups::GROUP_OPTION)?;
    let p = group.get("priority")?.as_u64()?;
    u32::try_from(p).ok().filter(|p| *p > 0)
}

/// BullMQ's range names; `waiting` also covers jobs parked by a paused queue.
pub(crate) fn state_range_name(state: JobState) -> &'static str {
    state.as_str()
}

pub(crate) fn counts_from_engine(c: &bullmq::types::JobCounts) -> JobCounts {
    JobCounts {
        waiting: c.waiting + c.paused,
        prioritized: c.prioritized,
        delayed: c.delayed,
        active: c.active,
        completed: c.completed,
        failed: c.failed,
        waiting_children: c.waiting_children,
    }
}

fn progress_value(p: &bullmq::JobProgress) -> serde_json::Value {
    match p {
        // The engine reads a stored `42` as 42.0; give integers back as integers.
        bullmq::JobProgress::Number(n) if n.fract() == 0.0 && n.abs() < 9e15 => {
            serde_json::json!(*n as i64)
        }
        bullmq::JobProgress::Number(n) => serde_json::json!(n),
        bullmq::JobProgress::Object(v) => v.clone(),
    }
}

pub(crate) fn job_info(job: &bullmq::Job) -> JobInfo {
    let return_value = match job.returnvalue() {
        "" => None,
        raw => Some(
            serde_json::from_str(raw).unwrap_or_else(|_| serde_json::Value::String(raw.to_owned())),
        ),
    };
    JobInfo {
        id: job.id().to_owned(),
        name: job.name().to_owned(),
        data: job.data().clone(),
        progress: progress_value(job.progress()),
        attempts_made: job.attempts_made(),
        attempts_started: job.attempts_started(),
        max_attempts: job.opts().attempts.unwrap_or(1).max(1),
        timestamp_ms: job.timestamp(),
        processed_on_ms: job.processed_on(),
        finished_on_ms: job.finished_on(),
        failed_reason: Some(job.failed_reason())
            .filter(|r| !r.is_empty())
            .map(str::to_owned),
        return_value,
        delay: Duration::from_millis(job.delay()),
        priority: group_priority(job.opts()).unwrap_or_else(|| job.priority()),
        options: options_from_engine(job.opts()),
        stacktrace: match job.stacktrace() {
            "" => Vec::new(),
            raw => serde_json::from_str(raw).unwrap_or_else(|_| vec![raw.to_owned()]),
        },
        runs_at_ms: None,
        parent: job.parent().map(|parent| crate::job::ParentJob {
            queue_key: parent.queue_key.clone(),
            id: parent.id.clone(),
        }),
        state: None,
    }
}

pub(crate) fn job_meta(job: &bullmq::Job, queue: &Arc<str>) -> JobMeta {
    JobMeta {
        id: job.id().to_owned(),
        name: job.name().to_owned(),
        queue: queue.clone(),
        attempts_made: job.attempts_made(),
        attempts_started: job.attempts_started(),
        timestamp_ms: job.timestamp(),
        options: options_from_engine(job.opts()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engines_job_errors_keep_their_class_and_name_the_queue() {
        let in_email = |e| engine_error_in(e, "email");
        assert!(matches!(
            in_email(bullmq::Error::JobNotFound("j1".into())),
            Error::JobNotFound { queue, id } if queue == "email" && id == "j1"
        ));
        assert!(matches!(
            in_email(bullmq::Error::JobLocked("j2".into())),
            Error::Locked { .. }
        ));
        assert!(
            matches!(in_email(bullmq::Error::WorkerClosed), Error::WorkerClosed { queue } if queue == "email")
        );
        let limited = in_email(bullmq::Error::RateLimited { delay_ms: 1500 });
        assert!(
            matches!(&limited, Error::RateLimited { retry_after, .. } if *retry_after == Duration::from_millis(1500))
        );
        for e in [limited, in_email(bullmq::Error::WorkerClosed)] {
            assert!(!matches!(e, Error::Redis(_)), "{e}");
        }
    }

    #[test]
    fn options_round_trip_through_the_engine() {
        let ours = JobOptions::new()
            .attempts(5)
            .backoff(Backoff::exponential(Duration::from_secs(3)))
            .delay(Duration::from_millis(1500))
            .priority(7)
            .lifo()
            .job_id("welcome-42")
            .remove_on_complete(Retention::Last(100))
            .remove_on_fail(Retention::Age(Duration::from_secs(3600)))
            .deduplication(Deduplication::new("d").ttl(Duration::from_secs(2)).extend())
            .timeout(Duration::from_millis(2500))
            .trace(TraceContext::new_root());
        let engine = options_to_engine(&ours, 1234);
        assert_eq!(engine.extensions.get(TIMEOUT_KEY), Some(&2500.into()));
        assert_eq!(engine.timestamp, Some(1234));
        assert_eq!(engine.delay, Some(1500));
        assert!(matches!(
            engine.backoff,
            Some(BackoffStrategy::Exponential(3000))
        ));
        assert_eq!(options_from_engine(&engine), ours);
        // What the add script stores (msgpack in, JSON out) reads back the same way.
        let stored: bullmq::JobOptions =
            serde_json::from_str(&serde_json::to_string(&engine).unwrap()).unwrap();
        assert_eq!(options_from_engine(&stored), ours);
    }

    #[test]
    fn a_grouped_jobs_priority_travels_in_its_group_option() {
        let ours = JobOptions::new().group("tenant-42").priority(3);
        let engine = options_to_engine(&ours, 1);
        assert_eq!(
            engine.priority, None,
            "BullMQ's add must leave it in `wait`"
        );
        assert_eq!(
            engine.extensions.get("group"),
            Some(&serde_json::json!({ "id": "tenant-42", "priority": 3 }))
        );
        let stored: bullmq::JobOptions =
            serde_json::from_str(&serde_json::to_string(&engine).unwrap()).unwrap();
        assert_eq!(options_from_engine(&stored), ours);
    }

    #[test]
    fn a_job_without_extras_stores_none() {
        let engine = options_to_engine(&JobOptions::new().attempts(2), 1);
        let json = serde_json::to_value(&engine).unwrap();
        assert_eq!(json, serde_json::json!({"attempts": 2, "timestamp": 1}));
    }

    #[test]
    fn a_context_the_producer_omitted_is_not_continued() {
        let mut engine = options_to_engine(&JobOptions::new().trace(TraceContext::new_root()), 1);
        engine.telemetry_omit_context = Some(true);
        assert_eq!(options_from_engine(&engine).trace, None);
    }

    #[test]
    fn keep_maps_to_bullmq_semantics() {
        assert!(matches!(
            keep_to_engine(Retention::All),
            RemoveOnFinish::Bool(false)
        ));
        assert!(matches!(
            keep_to_engine(Retention::None),
            RemoveOnFinish::Bool(true)
        ));
        match keep_to_engine(Retention::Age(Duration::from_millis(90_500))) {
            RemoveOnFinish::Options(k) => assert_eq!(k.age, Some(90), "BullMQ ages are seconds"),
            other => panic!("{other:?}"),
        }
    }
}
