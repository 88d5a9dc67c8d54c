//! `#[processor("queue", concurrency = 5, job = "welcome", timeout = "30s",
//! lock_duration = "30s", limiter(max = 10, per = "1s"), per_minute_metrics = 1440,
//! groups(concurrency = 2, rate = "30/1m"), batch(size = 100, wait = "20ms"),
//! crate = "..")]`.
//!
//! `batch(..)` makes the fn a batch handler (`async fn(Batch<T>, Dep<A>, ..) ->
//! Result<BatchResult, JobError>`): `size = N` (1 to 1,000 jobs a call) and, optionally,
//! `wait = "20ms"` (how long a batch waits for more after its first job; none by
//! default).
//!
//! `groups` is fair groups: a bare `groups` (groups take turns, no limit), or
//! `groups(..)` with `concurrency = N` (`N >= 1`, active jobs per group) and/or
//! `rate = "<max>/<window>"` (at most `max >= 1` starts per group per window; the
//! window is a duration as `timeout` writes it, `"500ms"`, `"30s"`, `"1m"`, `"1h"`, or
//! a bare unit for one of it, `"30/s"`).

use proc_macro2::TokenStream;
use syn::{Lit, LitStr};

use crate::args::{self, Args, Item, QueueRef, Value};
use crate::diagnostics::Errors;

const OPTIONS: &[&str] = &[
    "also_serve",
    "concurrency",
    "job",
    "timeout",
    "lock_duration",
    "limiter",
    "per_minute_metrics",
    "groups",
    "batch",
    "crate",
];

/// The most jobs a batch may hold (queue-core's bound, checked here at the token).
const MAX_BATCH_SIZE: u64 = 1_000;

/// Checked `batch(..)`: at most `size` jobs a call, waiting up to `wait_ms`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BatchConfig {
    pub(crate) size: u64,
    pub(crate) wait_ms: u64,
}

/// The keys of `groups(..)`.
const GROUP_OPTIONS: &[&str] = &["concurrency", "rate"];

/// Checked `groups` limits: queue-core's `GroupLimits`, as plain numbers.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct GroupsConfig {
    /// Active jobs per group, over every worker.
    pub(crate) concurrency: Option<u32>,
    /// At most `.0` starts per group per `.1` milliseconds.
    pub(crate) rate: Option<(u64, u64)>,
}

/// Checked processor options.
pub(crate) struct ProcessorConfig {
    pub(crate) queue: QueueRef,
    pub(crate) job: Option<LitStr>,
    pub(crate) concurrency: Option<u64>,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) lock_duration_ms: Option<u64>,
    pub(crate) limiter: Option<(u64, u64)>,
    /// BullMQ's per-minute metrics: how many minutes Redis keeps.
    pub(crate) per_minute_metrics: Option<u64>,
    /// More queues the same handlers serve (`also_serve = ["email-eu"]`).
    pub(crate) also_serve: Vec<LitStr>,
    /// Fair groups (`groups`, `groups(concurrency = 2, rate = "30/1m")`).
    pub(crate) groups: Option<GroupsConfig>,
    /// A batch handler (`batch(size = 100, wait = "20ms")`).
    pub(crate) batch: Option<BatchConfig>,
    /// `batch` was written, well or not: the fn is checked as a batch handler either
    /// way, so that a mistake in `batch(..)` is not followed by one about `Batch<T>`.
    pub(crate) batch_written: bool,
    pub(crate) krate: TokenStream,
}

impl ProcessorConfig {
    /// Validates every option, reporting all problems at once.
    pub(crate) fn from_args(args: &Args, errors: &mut Errors) -> Option<Self> {
        let queue = args.queue_ref(errors, "processor");
        args::reject_duplicates(&args.items, errors);
        let mut config = ProcessorConfig {
            queue: queue
                .clone()
                .unwrap_or_else(|| QueueRef::Name(LitStr::new("", proc_macro2::Span::call_site()))),
            job: None,
            concurrency: None,
            timeout_ms: None,
            lock_duration_ms: None,
            limiter: None,
            per_minute_metrics: None,
            also_serve: Vec::new(),
            groups: None,
            batch: None,
            batch_written: false,
            krate: quote::quote!(::queue_core),
        };
        // A bare first word was reported as an unquoted queue name already.
        let skip = usize::from(
            args.name.is_none()
                && args.queue_type.is_none()
                && matches!(args.items.first(), Some(i) if matches!(i.value, Value::Flag)),
        );
        for item in args.items.iter().skip(skip) {
            match item.key.to_string().as_str() {
                "concurrency" => config.concurrency = args::positive_integer(item, errors),
                "job" if matches!(config.queue, QueueRef::Type(_)) => errors.spanned(
                    &item.key,
                    "a processor of a declared queue handles the job its payload type declares; leave `job = ..` out",
                ),
                "job" => {
                    config.job = args::string(item, errors);
                    if let Some(job) = config.job.as_ref().filter(|j| j.value().is_empty()) {
                        errors.spanned(
                            job,
                            "the job name cannot be empty; leave `job` out to handle every name",
                        );
                    }
                }
                "also_serve" => config.also_serve = also_serve(item, errors),
                "timeout" => config.timeout_ms = args::duration(item, errors),
                "lock_duration" => config.lock_duration_ms = args::duration(item, errors),
                "limiter" => config.limiter = limiter(item, errors),
                "per_minute_metrics" => {
                    config.per_minute_metrics = args::positive_integer(item, errors)
                }
                "groups" => config.groups = groups(item, errors),
                "batch" => {
                    config.batch_written = true;
                    config.batch = batch(item, errors);
                }
                "crate" => {
                    if let Some(path) = args::crate_option(item, errors) {
                        config.krate = path;
                    }
                }
                _ => args::unknown(item, OPTIONS, errors),
            }
        }
        queue.map(|_| config)
    }
}

/// `also_serve = ["email-eu", "email-us"]`: queue names, checked as the first one is.
fn also_serve(item: &Item, errors: &mut Errors) -> Vec<LitStr> {
    let Value::Strings(queues) = &item.value else {
        errors.spanned(
            &item.key,
            "write the other queues as also_serve = [\"email-eu\"]",
        );
        return Vec::new();
    };
    for queue in queues {
        if queue.value().is_empty() || queue.value().contains(':') {
            errors.spanned(
                queue,
                "a queue name is non-empty and without ':' (BullMQ's key separator)",
            );
        }
    }
    queues.clone()
}

/// `limiter(max = 10, per = "1s")`.
fn limiter(item: &Item, errors: &mut Errors) -> Option<(u64, u64)> {
    let Value::List(inner) = &item.value else {
        errors.spanned(
            &item.key,
            "write the limiter as limiter(max = 10, per = \"1s\")",
        );
        return None;
    };
    let (mut max, mut per) = (None, None);
    for part in inner {
        match part.key.to_string().as_str() {
            "max" => max = args::positive_integer(part, errors),
            "per" => per = args::duration(part, errors),
            _ => args::unknown(part, &["max", "per"], errors),
        }
    }
    match (max, per) {
        (Some(max), Some(per)) => Some((max, per)),
        _ => {
            errors.spanned(
                &item.key,
                "the limiter needs both: limiter(max = 10, per = \"1s\")",
            );
            None
        }
    }
}

/// `groups`, or `groups(concurrency = 2, rate = "30/1m")` (either key, or both).
fn groups(item: &Item, errors: &mut Errors) -> Option<GroupsConfig> {
    let inner = match &item.value {
        Value::Flag => return Some(GroupsConfig::default()),
        Value::List(inner) => inner,
        Value::Lit(_) | Value::Strings(_) => {
            let message = "write `groups` alone (groups take turns, no limit), or groups(concurrency = 2, rate = \"30/1m\")";
            match &item.value {
                Value::Lit(lit) => errors.spanned(lit, message),
                _ => errors.spanned(&item.key, message),
            }
            return None;
        }
    };
    let before = errors.count();
    args::reject_duplicates(inner, errors);
    let mut config = GroupsConfig::default();
    for part in inner {
        match part.key.to_string().as_str() {
            "concurrency" => config.concurrency = group_concurrency(part, errors),
            "rate" => config.rate = group_rate(part, errors),
            _ => errors.spanned(
                &part.key,
                format!(
                    "unknown option `{}` in groups(..); valid ones are: {}",
                    part.key,
                    GROUP_OPTIONS.join(", ")
                ),
            ),
        }
    }
    (errors.count() == before).then_some(config)
}

/// `batch(size = 100, wait = "20ms")`: `size` required, `wait` optional.
fn batch(item: &Item, errors: &mut Errors) -> Option<BatchConfig> {
    let form = "write the batch as batch(size = 100, wait = \"20ms\") (`wait` may be left out)";
    let Value::List(inner) = &item.value else {
        match &item.value {
            Value::Lit(lit) => errors.spanned(lit, form),
            _ => errors.spanned(&item.key, form),
        }
        return None;
    };
    let before = errors.count();
    args::reject_duplicates(inner, errors);
    let (mut size, mut wait_ms) = (None, 0);
    for part in inner {
        match part.key.to_string().as_str() {
            "size" => size = args::positive_integer(part, errors),
            "wait" => wait_ms = args::duration(part, errors).unwrap_or(0),
            _ => errors.spanned(
                &part.key,
                format!(
                    "unknown option `{}` in batch(..); valid ones are: size, wait",
                    part.key
                ),
            ),
        }
    }
    match size {
        Some(size) if size > MAX_BATCH_SIZE => {
            let at = inner.iter().find(|p| p.key == "size").map(|p| &p.key);
            errors.spanned(
                at,
                format!("a batch holds at most {MAX_BATCH_SIZE} jobs; `size = {size}` is more"),
            );
        }
        None if errors.count() == before => errors.spanned(&item.key, form),
        _ => {}
    }
    (errors.count() == before).then(|| BatchConfig {
        size: size.unwrap_or(1),
        wait_ms,
    })
}

/// `concurrency = N` inside `groups(..)`: `1 <= N <= u32::MAX`.
fn group_concurrency(part: &Item, errors: &mut Errors) -> Option<u32> {
    let Value::Lit(Lit::Int(int)) = &part.value else {
        let message = "a group's `concurrency` takes a whole number of at least 1, e.g. groups(concurrency = 2)";
        match &part.value {
            Value::Lit(other) => errors.spanned(other, message),
            _ => errors.spanned(&part.key, message),
        }
        return None;
    };
    match int.base10_parse::<u32>() {
        Ok(0) => errors.spanned(
            int,
            "a group's `concurrency` must be at least 1; to stop a group, pause it (`Queue::pause_group`)",
        ),
        Ok(n) => return Some(n),
        Err(_) => errors.spanned(
            int,
            format!(
                "a group's `concurrency` is a whole number from 1 to {}",
                u32::MAX
            ),
        ),
    }
    None
}

/// `rate = "30/1m"` inside `groups(..)`.
fn group_rate(part: &Item, errors: &mut Errors) -> Option<(u64, u64)> {
    let Value::Lit(Lit::Str(lit)) = &part.value else {
        let message = "a group's `rate` takes a string \"<max>/<window>\", e.g. rate = \"30/1m\"";
        match &part.value {
            Value::Lit(other) => errors.spanned(other, message),
            _ => errors.spanned(&part.key, message),
        }
        return None;
    };
    rate(&lit.value())
        .map_err(|message| errors.spanned(lit, message))
        .ok()
}

/// `"<max>/<window>"` as `(max, window in milliseconds)`: `"30/1m"` is `(30, 60_000)`;
/// a bare unit is one of it (`"30/s"` is `"30/1s"`).
fn rate(text: &str) -> Result<(u64, u64), String> {
    let form = "write the rate as \"<max>/<window>\", e.g. \"30/1m\" (at most 30 starts a minute)";
    let Some((max, window)) = text.split_once('/') else {
        return Err(format!("`{text}` is not a rate; {form}"));
    };
    let (max, window) = (max.trim(), window.trim());
    if max.is_empty() || window.is_empty() {
        return Err(format!("`{text}` is not a rate; {form}"));
    }
    let max: u64 = max
        .parse()
        .map_err(|_| format!("`{max}` is not a whole number of starts; {form}"))?;
    if max == 0 {
        return Err(
            "a group's rate must allow at least one start per window; to stop a group, pause it (`Queue::pause_group`)"
                .to_owned(),
        );
    }
    // A bare unit is one of it: "30/s" is "30/1s".
    let bare_unit = window.starts_with(|c: char| c.is_ascii_alphabetic());
    let counted = if bare_unit {
        format!("1{window}")
    } else {
        window.to_owned()
    };
    let digits = counted
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(counted.len());
    let under_a_millisecond = matches!(&counted[digits..], "us" | "µs" | "ns")
        || counted[..digits].parse::<u64>() == Ok(0);
    if under_a_millisecond {
        return Err(format!(
            "a group's rate window must be at least 1ms; `{window}` is shorter (windows are written in ms, s, m or h)"
        ));
    }
    let millis = queue_vocab::parse_duration_millis(&counted).map_err(|message| {
        if bare_unit {
            format!("`{window}` is not a unit; use ms, s, m or h, e.g. \"30/s\" or \"30/1m\"")
        } else {
            message
        }
    })?;
    Ok((max, millis))
}

#[cfg(test)]
mod tests {
    use super::{rate, GroupsConfig, ProcessorConfig};
    use crate::args::Args;
    use crate::diagnostics::Errors;

    /// The `groups` a processor's arguments give, and how many errors they raise.
    fn groups_of(attr: proc_macro2::TokenStream) -> (Option<GroupsConfig>, usize) {
        let args: Args = syn::parse2(attr).expect("arguments parse");
        let mut errors = Errors::default();
        let groups = ProcessorConfig::from_args(&args, &mut errors).and_then(|c| c.groups);
        let count = errors.count();
        let _ = errors.finish(());
        (groups, count)
    }

    #[test]
    fn groups_are_read_as_written() {
        let (groups, errors) = groups_of(quote::quote!("reports", groups));
        assert_eq!((groups, errors), (Some(GroupsConfig::default()), 0));
        let (groups, errors) = groups_of(quote::quote!(
            "reports",
            concurrency = 20,
            groups(concurrency = 2, rate = "30/1m")
        ));
        let expected = GroupsConfig {
            concurrency: Some(2),
            rate: Some((30, 60_000)),
        };
        assert_eq!((groups, errors), (Some(expected), 0));
        let (groups, _) = groups_of(quote::quote!("reports", groups(rate = "5/s")));
        assert_eq!(groups.and_then(|g| g.rate), Some((5, 1_000)));
        assert_eq!(groups_of(quote::quote!("reports")).0, None);
    }

    #[test]
    fn every_group_mistake_is_reported() {
        let attr = quote::quote!(
            "reports",
            groups(concurrency = 0, rate = "0/1m", burst = 3, rate = "1/s")
        );
        // concurrency 0, max 0, the unknown key, the second rate.
        assert_eq!(groups_of(attr).1, 4);
        assert_eq!(groups_of(quote::quote!("reports", groups = 3)).1, 1);
        assert_eq!(groups_of(quote::quote!("reports", groups, groups)).1, 1);
    }

    #[test]
    fn rates_read_as_starts_per_window_in_milliseconds() {
        assert_eq!(rate("30/1m"), Ok((30, 60_000)));
        assert_eq!(rate("10/500ms"), Ok((10, 500)));
        assert_eq!(rate("1/1h"), Ok((1, 3_600_000)));
        assert_eq!(rate("30/s"), Ok((30, 1_000)));
        assert_eq!(rate(" 30 / m "), Ok((30, 60_000)));
    }

    #[test]
    fn bad_rates_say_what_is_wrong() {
        let error = |text| rate(text).unwrap_err();
        assert!(error("30").contains("is not a rate"));
        assert!(error("thirty/1m").contains("not a whole number"));
        assert!(error("/1m").contains("is not a rate"));
        assert!(error("0/1m").contains("at least one start"));
        assert!(error("5/0s").contains("at least 1ms"));
        assert!(error("5/500us").contains("at least 1ms"));
        assert!(error("5/1min").contains("no known unit"));
        assert!(error("5/min").contains("`min` is not a unit"));
        assert!(error("5/us").contains("`us` is shorter"));
        assert!(error("5/").contains("is not a rate"));
        assert!(error("5/30").contains("no known unit"));
    }
}
