//! How a job's options are stored in an outbox row: a JSON record of our own, so that
//! a row written by one version of the app is read by the next (unknown fields are
//! ignored, missing ones are unset).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::options::{Backoff, Deduplication, JobOptions, Retention};
use crate::trace::TraceContext;

/// [`JobOptions`] as stored: durations in milliseconds, enums tagged by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StoredOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    attempts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    backoff: Option<StoredBackoff>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delay_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    priority: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    lifo: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    remove_on_complete: Option<StoredKeep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    remove_on_fail: Option<StoredKeep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deduplication: Option<StoredDedup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<u64>,
    /// The trace context, as `traceparent` and `tracestate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    traceparent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tracestate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stack_trace_limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    group: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum StoredBackoff {
    Fixed { delay_ms: u64 },
    Exponential { delay_ms: u64 },
    Custom { name: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "keep", rename_all = "camelCase")]
enum StoredKeep {
    All,
    None,
    Last { count: usize },
    Age { age_ms: u64 },
    LastWithin { count: usize, age_ms: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredDedup {
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ttl_ms: Option<u64>,
    #[serde(default)]
    extend: bool,
    #[serde(default)]
    replace: bool,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl StoredOptions {
    /// The record of `opts` (the job id is a column of its own).
    pub(crate) fn of(opts: &JobOptions) -> Self {
        StoredOptions {
            attempts: opts.attempts,
            backoff: opts.backoff.as_ref().map(|b| match b {
                Backoff::Fixed(d) => StoredBackoff::Fixed { delay_ms: ms(*d) },
                Backoff::Exponential(d) => StoredBackoff::Exponential { delay_ms: ms(*d) },
                Backoff::Custom(name) => StoredBackoff::Custom { name: name.clone() },
            }),
            delay_ms: opts.delay.map(ms),
            priority: opts.priority,
            lifo: opts.lifo,
            remove_on_complete: opts.remove_on_complete.map(StoredKeep::of),
            remove_on_fail: opts.remove_on_fail.map(StoredKeep::of),
            deduplication: opts.deduplication.as_ref().map(|d| StoredDedup {
                id: d.id.clone(),
                ttl_ms: d.ttl.map(ms),
                extend: d.extend,
                replace: d.replace,
            }),
            timeout_ms: opts.timeout.map(ms),
            traceparent: opts.trace.as_ref().map(TraceContext::traceparent),
            tracestate: opts
                .trace
                .as_ref()
                .and_then(|t| t.tracestate().map(str::to_owned)),
            stack_trace_limit: opts.stack_trace_limit,
            group: opts.group.clone(),
        }
    }

    /// The options again, with `job_id`.
    pub(crate) fn into_options(self, job_id: String) -> JobOptions {
        JobOptions {
            attempts: self.attempts,
            backoff: self.backoff.map(|b| match b {
                StoredBackoff::Fixed { delay_ms } => {
                    Backoff::Fixed(Duration::from_millis(delay_ms))
                }
                StoredBackoff::Exponential { delay_ms } => {
                    Backoff::Exponential(Duration::from_millis(delay_ms))
                }
                StoredBackoff::Custom { name } => Backoff::Custom(name),
            }),
            delay: self.delay_ms.map(Duration::from_millis),
            priority: self.priority,
            lifo: self.lifo,
            job_id: Some(job_id),
            remove_on_complete: self.remove_on_complete.map(StoredKeep::into_keep),
            remove_on_fail: self.remove_on_fail.map(StoredKeep::into_keep),
            deduplication: self.deduplication.map(|d| Deduplication {
                id: d.id,
                ttl: d.ttl_ms.map(Duration::from_millis),
                extend: d.extend,
                replace: d.replace,
            }),
            timeout: self.timeout_ms.map(Duration::from_millis),
            trace: self
                .traceparent
                .as_deref()
                .and_then(|tp| TraceContext::from_traceparent(tp, self.tracestate.as_deref())),
            stack_trace_limit: self.stack_trace_limit,
            group: self.group,
            // Only a scheduler's runs have one, and no scheduler adds through the outbox.
            skip_late: None,
        }
    }
}

impl StoredKeep {
    fn of(keep: Retention) -> Self {
        match keep {
            Retention::All => StoredKeep::All,
            Retention::None => StoredKeep::None,
            Retention::Last(count) => StoredKeep::Last { count },
            Retention::Age(age) => StoredKeep::Age { age_ms: ms(age) },
            Retention::LastWithin { count, age } => StoredKeep::LastWithin {
                count,
                age_ms: ms(age),
            },
        }
    }

    fn into_keep(self) -> Retention {
        match self {
            StoredKeep::All => Retention::All,
            StoredKeep::None => Retention::None,
            StoredKeep::Last { count } => Retention::Last(count),
            StoredKeep::Age { age_ms } => Retention::Age(Duration::from_millis(age_ms)),
            StoredKeep::LastWithin { count, age_ms } => Retention::LastWithin {
                count,
                age: Duration::from_millis(age_ms),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_survives_the_round_trip() {
        let opts = JobOptions::new()
            .job_id("welcome-1")
            .attempts(5)
            .backoff(Backoff::exponential(Duration::from_secs(3)))
            .delay(Duration::from_millis(1500))
            .priority(7)
            .group("tenant-7")
            .lifo()
            .remove_on_complete(Retention::Last(100))
            .remove_on_fail(Retention::LastWithin {
                count: 10,
                age: Duration::from_secs(60),
            })
            .deduplication(Deduplication::new("d").ttl(Duration::from_secs(9)).extend())
            .timeout(Duration::from_secs(30))
            .stack_trace_limit(3)
            .trace(
                TraceContext::from_traceparent(
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                    Some("k=v"),
                )
                .unwrap(),
            );
        let json = serde_json::to_string(&StoredOptions::of(&opts)).unwrap();
        let back: StoredOptions = serde_json::from_str(&json).unwrap();
        assert_eq!(back.into_options("welcome-1".into()), opts);
    }

    #[test]
    fn unset_options_store_nothing_and_unknown_fields_are_ignored() {
        let json = serde_json::to_string(&StoredOptions::of(&JobOptions::new())).unwrap();
        assert_eq!(json, "{}");
        let later: StoredOptions = serde_json::from_str(r#"{"attempts":2,"future":1}"#).unwrap();
        assert_eq!(
            later.into_options("a-1".into()),
            JobOptions::new().job_id("a-1").attempts(2)
        );
    }
}
