//! `#[processor("queue", concurrency = 5, job = "welcome", timeout = "30s",
//! lock_duration = "30s", limiter(max = 10, per = "1s"), per_minute_metrics = 1440,
//! crate = "..")]`.

use proc_macro2::TokenStream;
use syn::LitStr;

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
    "crate",
];

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
