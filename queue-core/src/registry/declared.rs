//! The `#[job_queue]` declarations linked into this binary, checked against the app's
//! handlers at start-up.

use std::collections::BTreeMap;

use super::JobTypeRecord;
use crate::contract::DeclaredJob;
use crate::handler::{plan_of, PlannedHandler, QueuePlan};

/// Every declared job, sorted by queue and name, with `rename` applied to queue names.
pub(crate) fn declared_jobs(
    records: &[&'static JobTypeRecord],
    plans: &[QueuePlan],
    rename: impl Fn(&str) -> String,
) -> Vec<DeclaredJob> {
    let mut jobs: Vec<DeclaredJob> = records
        .iter()
        .map(|record| {
            let queue = rename(record.queue);
            // Its own handler, of the declared payload; or, with none by its name, the
            // queue's catch-all, which takes whatever comes.
            let handled = match claimed(plans, &queue, record.name) {
                Some(h) => h.handler.payload_id == (record.payload.id)(),
                None => plan_of(plans, &queue).is_some_and(|p| p.fallback.is_some()),
            };
            DeclaredJob {
                queue,
                name: record.name.to_owned(),
                payload_type: (record.payload.name)(),
                output_type: (record.output.name)(),
                payload_schema: (record.payload_schema)(),
                output_schema: (record.output_schema)(),
                handled,
            }
        })
        .collect();
    jobs.sort_by(|a, b| (&a.queue, &a.name).cmp(&(&b.queue, &b.name)));
    jobs
}

/// The start-up problems with declarations: one job declared by two types (declarations
/// in two crates), a handler registered by name for a declared job with a payload type
/// other than the declared one, and a handler of a declared queue claiming a job name
/// its declaration does not list (a typo, or a missing `#[job]` line: its jobs would
/// fail at run time as unknown). Queue names are compared after `rename`.
pub(crate) fn check_declarations(
    records: &[&'static JobTypeRecord],
    plans: &[QueuePlan],
    rename: impl Fn(&str) -> String,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut first: BTreeMap<(String, &str), &JobTypeRecord> = BTreeMap::new();
    for record in records {
        let queue = rename(record.queue);
        let mismatched = claimed(plans, &queue, record.name)
            .filter(|planned| planned.handler.payload_id != (record.payload.id)());
        if let Some(planned) = mismatched {
            problems.push(format!(
                "job `{}` on queue `{queue}` is declared with payload `{}` ({}), but its handler takes `{}`; take `Job<{}>`",
                record.name,
                (record.payload.name)(),
                record.label,
                planned.handler.payload_type,
                short_name((record.payload.name)()),
            ));
        }
        let key = (queue.clone(), record.name);
        match first.get(&key) {
            Some(earlier) if (earlier.payload.id)() != (record.payload.id)() => {
                problems.push(format!(
                    "job `{}` on queue `{queue}` is declared twice: by {} (`{}`) and by {} (`{}`); give one of them another name",
                    record.name,
                    earlier.label,
                    (earlier.payload.name)(),
                    record.label,
                    (record.payload.name)(),
                ));
            }
            Some(_) => {}
            None => {
                first.insert(key, record);
            }
        }
    }
    for plan in plans {
        let declared: Vec<&str> = records
            .iter()
            .filter(|record| rename(record.queue) == plan.queue)
            .map(|record| record.name)
            .collect();
        if declared.is_empty() {
            continue;
        }
        for (name, planned) in &plan.by_name {
            if !declared.contains(&name.as_str()) {
                let near = super::names::nearest(name, declared.iter().copied())
                    .map_or_else(String::new, |near| format!("did you mean `{near}`? "));
                problems.push(format!(
                    "handler {} claims job `{name}` on queue `{}`, which the queue's declaration does not list ({near}it lists: {}); fix the name, or declare the job with a `#[job(\"{name}\")]` line",
                    planned.label,
                    plan.queue,
                    declared.join(", "),
                ));
            }
        }
    }
    problems
}

/// The handler `plans` register by name for job `name` of `queue` (a catch-all does not
/// count: it takes whatever comes, declared or not).
fn claimed<'a>(plans: &'a [QueuePlan], queue: &str, name: &str) -> Option<&'a PlannedHandler> {
    plan_of(plans, queue).and_then(|p| p.by_name.get(name))
}

/// `a::b::Welcome` -> `Welcome`, for a suggestion.
fn short_name(path: &str) -> &str {
    path.rsplit("::").next().unwrap_or(path)
}
