//! Start-up checks: every problem with the registered processors, reported at once.

use std::collections::BTreeMap;
use std::fmt;

use super::{PlannedHandler, QueuePlan};
use crate::deps::Deps;
use crate::processor::Processor;

/// The app refused to start: every problem found in the registrations, one per line.
///
/// ```
/// use queue_core::{Job, JobError, Processor, QueueApp};
///
/// async fn a(_job: Job<String>) -> Result<(), JobError> { Ok(()) }
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let err = QueueApp::builder()
///     .processor(Processor::new("email").job("welcome", a))
///     .processor(Processor::new("email").job("welcome", a))
///     .check()
///     .unwrap_err();
/// assert!(err.to_string().contains("claimed twice"));
/// # });
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct RegistryError {
    problems: Vec<String>,
}

impl RegistryError {
    /// Each problem, in queue order.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the queue app cannot start ({} problem(s)):",
            self.problems.len()
        )?;
        for problem in &self.problems {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}

/// Merges processors per queue (sorted by queue name) and checks them against what
/// the app provides.
pub(crate) fn plan_queues(
    processors: &[Processor],
    deps: &Deps,
) -> Result<Vec<QueuePlan>, RegistryError> {
    let mut problems = Vec::new();
    let mut plans: BTreeMap<&str, QueuePlan> = BTreeMap::new();
    let mut claimed_by: BTreeMap<(&str, Option<&str>), &str> = BTreeMap::new();

    for processor in processors {
        let queue = processor.queue.as_str();
        check_queue_name(queue, &mut problems);
        if processor.concurrency == 0 {
            problems.push(format!(
                "processor for queue `{queue}`: concurrency must be at least 1"
            ));
        }
        if processor.handlers.is_empty() {
            problems.push(format!(
                "processor for queue `{queue}` has no handler; add `.job(name, handler)` or `.any_job(handler)`"
            ));
        }
        let plan = plans.entry(queue).or_insert_with(|| QueuePlan {
            queue: queue.to_owned(),
            concurrency: processor.concurrency,
            lock_duration: processor.lock_duration,
            limiter: processor.limiter,
            cancel_grace: processor.cancel_grace,
            by_name: BTreeMap::new(),
            fallback: None,
        });
        merge_settings(plan, processor, &mut problems);

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
            };
            match &registered.job_name {
                Some(name) => {
                    plan.by_name.insert(name.clone(), planned);
                }
                None => plan.fallback = Some(planned),
            }
        }
    }

    if problems.is_empty() {
        Ok(plans.into_values().collect())
    } else {
        Err(RegistryError { problems })
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

/// Two processors of one queue share a worker: the larger concurrency wins; lock and
/// limiter settings must agree because they are the worker's, not a handler's.
fn merge_settings(plan: &mut QueuePlan, processor: &Processor, problems: &mut Vec<String>) {
    plan.concurrency = plan.concurrency.max(processor.concurrency);
    plan.cancel_grace = plan.cancel_grace.max(processor.cancel_grace);
    let queue = &plan.queue;
    match (plan.lock_duration, processor.lock_duration) {
        (Some(a), Some(b)) if a != b => problems.push(format!(
            "queue `{queue}`: processors disagree on lock_duration ({a:?} vs {b:?}); set it once"
        )),
        (None, Some(b)) => plan.lock_duration = Some(b),
        _ => {}
    }
    match (plan.limiter, processor.limiter) {
        (Some(a), Some(b)) if a != b => problems.push(format!(
            "queue `{queue}`: processors disagree on limiter ({a:?} vs {b:?}); set it once"
        )),
        (None, Some(b)) => plan.limiter = Some(b),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

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
        assert_eq!(email.concurrency, 5);
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
