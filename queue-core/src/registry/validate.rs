//! Start-up checks: every problem with the registered processors, reported at once.

use std::collections::BTreeMap;
use std::time::Duration;

use std::any::TypeId;
use std::collections::BTreeSet;

use super::Registered;
use crate::deps::Deps;
use crate::encryption::{Keys, Seals};
#[cfg(test)]
use crate::error::RegistryError;
use crate::handler::{plan_of, PlannedHandler, QueuePlan};
use crate::options::{WorkerOptions, MAX_BATCH_SIZE};
use crate::worker::Processor;

/// Merges processors per queue (sorted by queue name) and checks them against what
/// the app provides.
#[cfg(test)]
pub(crate) fn plan_queues(
    processors: &[Processor],
    deps: &Deps,
) -> Result<Vec<QueuePlan>, RegistryError> {
    let mut problems = Vec::new();
    let plans = merge_processors(processors, deps, &mut problems);
    RegistryError::from_problems(problems).map(|()| plans)
}

/// Checks a processor's durations, adding every problem found to `problems`.
fn check_durations(processor: &Processor, problems: &mut Vec<String>) {
    let queue = processor.queue.as_str();
    let values = [
        processor.timeout,
        processor.options.lock_duration,
        processor.options.stalled_interval,
        Some(processor.options.cancel_grace),
    ];
    let names = [
        "timeout",
        "lock_duration",
        "stalled_interval",
        "cancel_grace",
    ];
    for (name, value) in names.into_iter().zip(values) {
        // The ranges are queue-vocab's, which the macros check at compile time too.
        let Some((min, max)) = queue_vocab::duration_range(name) else {
            continue;
        };
        let (min, max) = (Duration::from_millis(min), Duration::from_millis(max));
        if let Some(value) = value.filter(|v| *v < min || *v > max) {
            problems.push(format!(
                "processor for queue `{queue}`: {name} {value:?} is out of range; use {min:?} to {max:?}"
            ));
        }
    }
    if let Some((max, per)) = processor.options.limiter {
        if max == 0 || per.is_zero() || per > Duration::from_secs(24 * 3600) {
            problems.push(format!(
                "processor for queue `{queue}`: limiter {max} per {per:?} is out of range; \
                 use at least 1 job per 1ms to 24h"
            ));
        }
    }
}

pub(crate) fn merge_processors(
    processors: &[Processor],
    deps: &Deps,
    problems: &mut Vec<String>,
) -> Vec<QueuePlan> {
    let mut plans: BTreeMap<&str, QueuePlan> = BTreeMap::new();
    let mut claimed_by: BTreeMap<(&str, Option<&str>), &str> = BTreeMap::new();

    for processor in processors {
        let queue = processor.queue.as_str();
        check_queue_name(queue, problems);
        if processor.options.concurrency == 0 {
            problems.push(format!(
                "processor for queue `{queue}`: concurrency must be at least 1"
            ));
        }
        check_durations(processor, problems);
        if processor.handlers.is_empty() {
            problems.push(format!(
                "processor for queue `{queue}` has no handler; add `.job(name, handler)` or `.any_job(handler)`"
            ));
        }
        let plan = plans.entry(queue).or_insert_with(|| QueuePlan {
            queue: queue.to_owned(),
            options: processor.options.clone(),
            by_name: BTreeMap::new(),
            fallback: None,
            // The app's keys and the queues that seal are set by `build`.
            sealer: Keys::default().for_queue(queue, Seals::Nothing),
        });
        merge_options(queue, &mut plan.options, &processor.options, problems);
        if let Some(batching) = &mut plan.options.batch {
            // The batch handler's processor is the queue's only one (checked below).
            batching.timeout = batching.timeout.or(processor.timeout);
        }

        for registered in &processor.handlers {
            for dep in &registered.handler.dependencies {
                if !deps.contains(dep) {
                    problems.push(format!(
                        "handler {} needs Dep<{}>, which nobody provided; add `.provide(..)` to the app builder",
                        registered.label, dep.type_name
                    ));
                }
            }
            let key = (queue, registered.job_name.as_deref());
            if let Some(first) = claimed_by.insert(key, &registered.label) {
                let what = match registered.job_name.as_deref() {
                    Some(name) => format!("job `{name}` on queue `{queue}`"),
                    None => format!("the catch-all handler of queue `{queue}`"),
                };
                problems.push(format!(
                    "{what} is claimed twice: by {first} and by {}",
                    registered.label
                ));
                continue;
            }
            let planned = PlannedHandler {
                handler: registered.handler.clone(),
                timeout: processor.timeout,
                label: registered.label.clone(),
            };
            match &registered.job_name {
                Some(name) => {
                    plan.by_name.insert(name.clone(), planned);
                }
                None => plan.fallback = Some(planned),
            }
        }
    }

    for plan in plans.values() {
        check_batches(plan, problems);
    }
    plans.into_values().collect()
}

/// A queue that runs in batches has one handler, the batch handler, for every name:
/// a job of another handler would need a worker of its own kind.
fn check_batches(plan: &QueuePlan, problems: &mut Vec<String>) {
    let queue = &plan.queue;
    let batch_handlers = plan.handlers().filter(|(_, h)| h.handler.batch).count();
    match plan.options.batch {
        Some(batching) => {
            if plan.handlers().count() != 1 || batch_handlers != 1 {
                let labels: Vec<&str> = plan.handlers().map(|(_, h)| h.label.as_str()).collect();
                problems.push(format!(
                    "queue `{queue}` runs in batches, so its batch handler must be its only handler; it has {}",
                    labels.join(", ")
                ));
            }
            if batching.size == 0 || batching.size > MAX_BATCH_SIZE {
                problems.push(format!(
                    "queue `{queue}`: a batch's size must be 1 to {MAX_BATCH_SIZE}, not {}",
                    batching.size
                ));
            }
            // The first jobs are locked while the batch waits for the rest.
            let lock = plan.options.lock_duration.unwrap_or(Duration::from_secs(30));
            if batching.wait > lock / 2 {
                problems.push(format!(
                    "queue `{queue}`: a batch's wait ({:?}) must be at most half its lock duration ({lock:?})",
                    batching.wait
                ));
            }
            if plan.options.groups.is_some() {
                problems.push(format!(
                    "queue `{queue}`: batches do not take jobs by group yet (each job of a batch would need its group's slot and rate); use batches or groups on a queue, not both"
                ));
            }
        }
        None if batch_handlers > 0 => problems.push(format!(
            "queue `{queue}` has a batch handler but no batch size; register it with `Processor::batch`"
        )),
        None => {}
    }
}

fn check_queue_name(queue: &str, problems: &mut Vec<String>) {
    if queue.is_empty() {
        problems.push("a processor has an empty queue name".to_owned());
    } else if queue.contains(':') {
        problems.push(format!(
            "queue name `{queue}` contains ':', which BullMQ uses to separate key parts; use '-' instead"
        ));
    }
}

/// Two processors of one queue share a worker: the larger concurrency wins; lock,
/// limiter and group settings must agree because they are the worker's, not a handler's.
fn merge_options(
    queue: &str,
    merged: &mut WorkerOptions,
    added: &WorkerOptions,
    problems: &mut Vec<String>,
) {
    merged.concurrency = merged.concurrency.max(added.concurrency);
    merged.stalled_interval = match (merged.stalled_interval, added.stalled_interval) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    merged.max_stalled_count = merged.max_stalled_count.max(added.max_stalled_count);
    merged.cancel_grace = merged.cancel_grace.max(added.cancel_grace);
    merged.fail_unknown_names |= added.fail_unknown_names;
    merged.metrics_data_points = merged.metrics_data_points.max(added.metrics_data_points);
    merged.event_capacity = merged.event_capacity.or(added.event_capacity);
    match (merged.lock_duration, added.lock_duration) {
        (Some(a), Some(b)) if a != b => problems.push(format!(
            "queue `{queue}`: processors disagree on lock_duration ({a:?} vs {b:?}); set it once"
        )),
        (None, Some(b)) => merged.lock_duration = Some(b),
        _ => {}
    }
    match (merged.limiter, added.limiter) {
        (Some(a), Some(b)) if a != b => problems.push(format!(
            "queue `{queue}`: processors disagree on limiter ({a:?} vs {b:?}); set it once"
        )),
        (None, Some(b)) => merged.limiter = Some(b),
        _ => {}
    }
    if let Some(limits) = added.groups {
        if let Err(e) = limits.validate() {
            problems.push(format!("queue `{queue}`: {e}"));
        }
    }
    match (merged.batch, added.batch) {
        (Some(a), Some(b)) if a != b => problems.push(format!(
            "queue `{queue}`: processors disagree on batches ({a:?} vs {b:?}); set them once"
        )),
        (None, Some(b)) => merged.batch = Some(b),
        _ => {}
    }
    match (merged.groups, added.groups) {
        (Some(a), Some(b)) if a != b => problems.push(format!(
            "queue `{queue}`: processors disagree on group limits ({a:?} vs {b:?}); set them once"
        )),
        (None, Some(b)) => merged.groups = Some(b),
        _ => {}
    }
}

/// The checks that involve the macro records: producers whose payload no handler of
/// their queue takes, listeners of queues this binary neither produces to nor
/// processes, and listeners' dependencies nobody provided. Records name queues as
/// written; `rename` gives the app's name for each. Returns the problems (empty when
/// all is well).
pub(crate) fn check_registrations(
    plans: &[QueuePlan],
    registered: &Registered,
    deps: &Deps,
    rename: impl Fn(&str) -> String,
) -> Vec<String> {
    let mut problems = Vec::new();
    let processed: BTreeSet<String> = plans.iter().map(|p| p.queue.clone()).collect();
    let produced: BTreeSet<String> = registered
        .producers
        .iter()
        .map(|p| rename(p.queue))
        .collect();

    for producer in registered.producers.iter().filter(|p| !p.declared) {
        let queue = rename(producer.queue);
        let Some(plan) = plan_of(plans, &queue) else {
            continue;
        };
        let sent = (producer.payload.id)();
        let untyped = TypeId::of::<serde_json::Value>();
        let accepted = plan.handlers().any(|(_, h)| {
            let taken = h.handler.payload_id;
            taken == sent || taken == untyped || sent == untyped
        });
        if !accepted {
            let taken: Vec<String> = plan
                .handlers()
                .map(|(name, h)| format!("{name}: `{}`", h.handler.payload_type))
                .collect();
            problems.push(format!(
                "producer {} sends `{}` to queue `{queue}`, but no handler of that queue takes it (they take {})",
                producer.label,
                (producer.payload.name)(),
                taken.join(", ")
            ));
        }
    }

    let known = || -> String {
        let all: BTreeSet<&str> = processed.union(&produced).map(String::as_str).collect();
        if all.is_empty() {
            "none".to_owned()
        } else {
            all.into_iter().collect::<Vec<_>>().join(", ")
        }
    };
    let listeners = registered
        .worker_listeners
        .iter()
        .map(|l| (l.queue, l.label, "on_worker_event", (l.dependencies)()))
        .chain(
            registered
                .queue_listeners
                .iter()
                .map(|l| (l.queue, l.label, "on_queue_event", (l.dependencies)())),
        );
    for (queue, label, kind, needs) in listeners {
        for dep in needs.iter().filter(|d| !deps.contains(d)) {
            problems.push(format!(
                "#[{kind}] {label} needs Dep<{}>, which nobody provided; add `.provide(..)` to the app builder",
                dep.type_name
            ));
        }
        let queue = rename(queue);
        let queue = queue.as_str();
        if !processed.contains(queue) && !produced.contains(queue) {
            problems.push(format!(
                "#[{kind}] {label} listens to queue `{queue}`, which nothing in this binary produces to or processes (known queues: {})",
                known()
            ));
        }
        if kind == "on_worker_event" && !processed.contains(queue) && produced.contains(queue) {
            problems.push(format!(
                "#[on_worker_event] {label} listens to worker events of queue `{queue}`, but this binary has no processor for it; use #[on_queue_event] to hear other processes' workers"
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{Dep, Job, JobError};

    struct Mailer;

    async fn plain(_job: Job<String>) -> Result<(), JobError> {
        Ok(())
    }

    async fn needs_mailer(_job: Job<String>, _m: Dep<Mailer>) -> Result<(), JobError> {
        Ok(())
    }

    fn problems(processors: &[Processor], deps: &Deps) -> Vec<String> {
        plan_queues(processors, deps)
            .unwrap_err()
            .problems()
            .to_vec()
    }

    #[test]
    fn zero_and_absurd_worker_durations_are_refused_with_their_range() {
        let found = problems(
            &[
                Processor::new("a")
                    .lock_duration(Duration::ZERO)
                    .timeout(Duration::ZERO)
                    .stalled_interval(Duration::from_secs(100 * 24 * 3600))
                    .limiter(0, Duration::from_secs(1))
                    .job("x", plain),
                Processor::new("b")
                    .lock_duration(Duration::from_secs(30))
                    .limiter(10, Duration::from_secs(1))
                    .job("x", plain),
            ],
            &Deps::default(),
        );
        let text = found.join("\n");
        for name in ["lock_duration", "timeout", "stalled_interval", "limiter"] {
            assert!(text.contains(&format!("`a`: {name}")), "{name}: {text}");
        }
        assert!(!text.contains("`b`"), "sane values pass: {text}");
        assert!(text.contains("use 100ms to 3600s"), "{text}");
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let found = problems(
            &[
                Processor::new("email")
                    .job("welcome", plain)
                    .job("welcome", plain),
                Processor::new("coupon").job("grant", needs_mailer),
                Processor::new("bad:name").job("x", plain),
            ],
            &Deps::default(),
        );
        assert_eq!(found.len(), 3, "{found:#?}");
        assert!(found
            .iter()
            .any(|p| p.contains("job `welcome` on queue `email` is claimed twice")));
        assert!(found
            .iter()
            .any(|p| p.contains("needs Dep<") && p.contains("Mailer")));
        assert!(found.iter().any(|p| p.contains("`bad:name` contains ':'")));
    }

    #[test]
    fn processors_of_one_queue_merge_and_sort() {
        let mut deps = Deps::default();
        deps.insert(Arc::new(Mailer));
        let plans = plan_queues(
            &[
                Processor::new("email")
                    .concurrency(2)
                    .job("welcome", needs_mailer),
                Processor::new("coupon").job("grant", plain),
                Processor::new("email").concurrency(5).any_job(plain),
            ],
            &deps,
        )
        .unwrap();
        let queues: Vec<_> = plans.iter().map(|p| p.queue.as_str()).collect();
        assert_eq!(queues, ["coupon", "email"]);
        let email = &plans[1];
        assert_eq!(email.options.concurrency, 5);
        assert!(email.handler_for("welcome").is_some());
        assert!(
            email.handler_for("anything").is_some(),
            "falls back to the catch-all"
        );
        assert_eq!(plans[0].known_names(), "grant");
        assert!(plans[0].handler_for("other").is_none());
    }

    #[test]
    fn conflicting_worker_settings_are_refused() {
        let found = problems(
            &[
                Processor::new("q")
                    .lock_duration(Duration::from_secs(5))
                    .job("a", plain),
                Processor::new("q")
                    .lock_duration(Duration::from_secs(9))
                    .job("b", plain),
                Processor::new("z").concurrency(0),
            ],
            &Deps::default(),
        );
        assert!(found
            .iter()
            .any(|p| p.contains("disagree on lock_duration")));
        assert!(found
            .iter()
            .any(|p| p.contains("concurrency must be at least 1")));
        assert!(found.iter().any(|p| p.contains("has no handler")));
    }
}
