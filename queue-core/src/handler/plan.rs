//! A queue's plan: its worker options and which handler takes each job name. Made by
//! the app from its registrations at start-up; read by the workers, and by an inline
//! app's runner.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::ErasedHandler;
use crate::deps::Deps;
use crate::encryption::{sealed_with, Field, Sealer};
use crate::job::{Job, JobError};
use crate::options::WorkerOptions;

/// The label of job names no handler is registered for by name (a catch-all handler
/// takes them): other producers may send any name, and each would be a new series.
#[cfg(feature = "metrics")]
pub const ANY_JOB_NAME: &str = "*";

/// One queue's worker plan: its settings and a handler per job name.
#[derive(Debug, Clone)]
pub(crate) struct QueuePlan {
    /// The queue's name in Redis.
    pub(crate) queue: String,
    pub(crate) options: WorkerOptions,
    pub(crate) by_name: BTreeMap<String, PlannedHandler>,
    pub(crate) fallback: Option<PlannedHandler>,
    /// Whether the queue's payloads are sealed, and the app's keys.
    pub(crate) sealer: Sealer,
}

/// A handler with the timeout of the processor that registered it.
#[derive(Debug, Clone)]
pub(crate) struct PlannedHandler {
    pub(crate) handler: ErasedHandler,
    pub(crate) timeout: Option<Duration>,
    /// Where it was registered (`queue/job (path::to::fn)`), for messages.
    pub(crate) label: String,
}

impl PlannedHandler {
    /// The timer one attempt of a job runs under, given the job's own timeout (its
    /// options'): the job's, else the processor's. None for a batch handler's job: its
    /// timeout is its batch's, kept by the batch's run (`handler::batch`), and a second
    /// timer of the job's own could win the race with another reason.
    pub(crate) fn attempt_timeout(&self, job_timeout: Option<Duration>) -> Option<Duration> {
        match self.handler.batch {
            true => None,
            false => job_timeout.or(self.timeout),
        }
    }
}

impl QueuePlan {
    /// The handler for a job name: the one that claims it, else the catch-all.
    pub(crate) fn handler_for(&self, job_name: &str) -> Option<&PlannedHandler> {
        self.by_name.get(job_name).or(self.fallback.as_ref())
    }

    /// The `name` label of a job's metrics: its name when a handler is registered for
    /// it by name, else [`ANY_JOB_NAME`].
    #[cfg(feature = "metrics")]
    pub(crate) fn metric_name<'a>(&'a self, job_name: &str) -> &'a str {
        self.by_name
            .get_key_value(job_name)
            .map_or(ANY_JOB_NAME, |(name, _)| name.as_str())
    }

    /// The job names this queue handles, for an "unknown job name" message.
    pub(crate) fn known_names(&self) -> String {
        let names: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    }

    /// One attempt of `planned` on `job`, as every runner (a worker, an inline app, the
    /// testing kit) runs it: the job's data opened first when it is sealed, and what the
    /// handler returns sealed when the queue seals or the job came sealed (what a
    /// sealed payload gives is as personal as the payload). Lazy, as
    /// [`ErasedHandler::run`] is.
    pub(crate) fn run(
        &self,
        planned: &PlannedHandler,
        job: Job<serde_json::Value>,
        deps: &Arc<Deps>,
    ) -> BoxFuture<'static, Result<serde_json::Value, JobError>> {
        let job = job.with_sealer(&self.sealer);
        // A batch handler's job that came alone (an inline app, the testing kit) is a
        // batch of one.
        let job = match planned.handler.batch && !job.is_in_batch() {
            true => super::batch_of_one(job, planned.timeout),
            false => job,
        };
        let was_sealed = sealed_with(&job.data).is_some();
        if !self.sealer.seals() && !was_sealed {
            return planned.handler.run(job, deps);
        }
        let sealer = self.sealer.clone();
        let handler = planned.handler.clone();
        let deps = deps.clone();
        Box::pin(async move {
            let value = match was_sealed {
                true => {
                    // A ciphertext that does not open will not change on a retry, and a
                    // key missing from this process's keyring is taken as lost (the
                    // rotation's order keeps a new key from reaching a process that
                    // lacks it).
                    let unopened =
                        |why: String| JobError::unrecoverable_msg(format!("the job's data: {why}"));
                    let plain = sealer
                        .open_json(Field::Data, &job.data)
                        .map_err(|e| unopened(e.to_string()))?
                        .ok_or_else(|| unopened("not sealed after all".to_owned()))?;
                    handler.run_opened(job, plain, &deps).await?
                }
                false => handler.run(job, &deps).await?,
            };
            let sealed = serde_json::to_vec(&value)
                .map_err(|e| e.to_string())
                .and_then(|plain| {
                    sealer
                        .seal(Field::ReturnValue, plain)
                        .map_err(|e| e.to_string())
                });
            sealed.map_err(|e| {
                JobError::unrecoverable_msg(format!("cannot seal the return value: {e}"))
            })
        })
    }

    /// Every handler with the job name it claims (`*` for the catch-all).
    pub(crate) fn handlers(&self) -> impl Iterator<Item = (&str, &PlannedHandler)> {
        self.by_name
            .iter()
            .map(|(name, h)| (name.as_str(), h))
            .chain(self.fallback.iter().map(|h| ("*", h)))
    }
}

/// The plan of `queue` (its name in Redis) among `plans`, if it is processed.
pub(crate) fn plan_of<'a>(plans: &'a [QueuePlan], queue: &str) -> Option<&'a QueuePlan> {
    plans.iter().find(|p| p.queue == queue)
}
