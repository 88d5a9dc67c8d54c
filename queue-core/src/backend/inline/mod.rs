//! Inline mode: an app without Redis whose adds run their handler at once, in the
//! caller's task, for unit tests of the code that adds jobs (request handlers). What
//! it does and does not simulate is listed in `testing`'s docs; everything that needs
//! Redis fails with `Error::Inline` ([`Backend::redis`](super::Backend::redis)).

mod claims;

pub(crate) use claims::MemoryClaims;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::deps::Deps;
use crate::encryption::Field;
use crate::handler::{attempt, plan_of, QueuePlan};
use crate::job::{Job, JobState};
use crate::options::JobOptions;

/// One job an inline app was given, and what became of it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct InlineJob {
    /// The queue.
    pub queue: String,
    /// The job id (yours, or `inline-<n>`).
    pub id: String,
    /// The job name.
    pub name: String,
    /// The payload, as JSON (as Redis would store it).
    pub data: serde_json::Value,
    /// The options it was added with, the app's defaults applied.
    pub options: JobOptions,
    /// Attempts run.
    pub attempts_made: u32,
    /// What became of it.
    pub outcome: InlineOutcome,
}

/// What became of an inline job.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum InlineOutcome {
    /// Its handler returned this.
    Completed {
        /// The return value, as JSON.
        value: serde_json::Value,
    },
    /// Its last attempt failed with this reason.
    Failed {
        /// The failure reason.
        reason: String,
    },
    /// No handler of this app takes it: it would wait in Redis for another service.
    NotHandled,
}

/// Adds the app itself to a job's dependencies (`Dep<QueueApp>`), given by the app once
/// it exists (it holds this runner, so the runner cannot hold it).
type ProvideApp = Box<dyn Fn(&mut Deps) + Send + Sync>;

/// The runner an inline app's queues add through.
pub(crate) struct InlineRunner {
    prefix: String,
    plans: Vec<QueuePlan>,
    deps: Deps,
    provide_app: OnceLock<ProvideApp>,
    jobs: Mutex<Vec<InlineJob>>,
    ids: Mutex<HashSet<(String, String)>>,
    /// The app's claims (`QueueApp::claims`), which a Redis app keeps in Redis.
    claims: Arc<MemoryClaims>,
}

impl std::fmt::Debug for InlineRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InlineRunner")
            .field("queues", &self.plans.len())
            .finish_non_exhaustive()
    }
}

impl InlineRunner {
    pub(crate) fn new(prefix: &str, plans: Vec<QueuePlan>, deps: Deps) -> Self {
        InlineRunner {
            prefix: prefix.to_owned(),
            plans,
            deps,
            provide_app: OnceLock::new(),
            jobs: Mutex::new(Vec::new()),
            ids: Mutex::new(HashSet::new()),
            claims: Arc::default(),
        }
    }

    /// The app's key prefix, as a Redis app would use it.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The app's claims, kept in memory.
    pub(crate) fn claims(&self) -> Arc<MemoryClaims> {
        self.claims.clone()
    }

    /// How jobs get `Dep<QueueApp>`: set once, by the app that owns this runner.
    pub(crate) fn attach(&self, provide_app: impl Fn(&mut Deps) + Send + Sync + 'static) {
        let _ = self.provide_app.set(Box::new(provide_app));
    }

    /// Every job given so far, in the order they finished.
    pub(crate) fn jobs(&self) -> Vec<InlineJob> {
        self.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Adds a job: a duplicate id adds nothing; otherwise its handler runs now, its
    /// attempts one after the other without backoff. Returns the id, whether it was a
    /// duplicate, and the state it ended in.
    pub(crate) async fn add(
        &self,
        queue: &str,
        name: &str,
        data: serde_json::Value,
        options: &JobOptions,
    ) -> (String, bool, JobState) {
        let id = {
            let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
            let id = options
                .job_id
                .clone()
                .unwrap_or_else(|| format!("inline-{}", ids.len() + 1));
            if !ids.insert((queue.to_owned(), id.clone())) {
                let state = self.state_of(queue, &id);
                return (id, true, state);
            }
            id
        };
        let (attempts_made, outcome) = self.run(queue, &id, name, &data, options).await;
        let state = match outcome {
            InlineOutcome::Completed { .. } => JobState::Completed,
            InlineOutcome::Failed { .. } => JobState::Failed,
            InlineOutcome::NotHandled => JobState::initial(options),
        };
        self.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(InlineJob {
                queue: queue.to_owned(),
                id: id.clone(),
                name: name.to_owned(),
                data,
                options: options.clone(),
                attempts_made,
                outcome,
            });
        (id, false, state)
    }

    fn state_of(&self, queue: &str, id: &str) -> JobState {
        let jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        match jobs.iter().find(|j| j.queue == queue && j.id == id) {
            Some(InlineJob {
                outcome: InlineOutcome::Completed { .. },
                ..
            }) => JobState::Completed,
            Some(InlineJob {
                outcome: InlineOutcome::Failed { .. },
                ..
            }) => JobState::Failed,
            // Still running (a handler re-adding its own id), or waiting for a handler.
            _ => JobState::Active,
        }
    }

    async fn run(
        &self,
        queue: &str,
        id: &str,
        name: &str,
        data: &serde_json::Value,
        options: &JobOptions,
    ) -> (u32, InlineOutcome) {
        let Some((plan, planned)) = plan_of(&self.plans, queue)
            .and_then(|plan| plan.handler_for(name).map(|planned| (plan, planned)))
        else {
            return (0, InlineOutcome::NotHandled);
        };
        let mut deps = self.deps.clone();
        if let Some(provide_app) = self.provide_app.get() {
            provide_app(&mut deps);
        }
        let deps = Arc::new(deps);
        let attempts = options.attempts.unwrap_or(1).max(1);
        let timeout = planned.attempt_timeout(options.timeout);
        let mut made = 0;
        loop {
            let job = Job::in_process(data.clone(), queue, id, name, made, options.clone());
            made += 1;
            let result = attempt(plan.run(planned, job, &deps), timeout).await;
            // Recorded opened: the record is what a test reads, and the key is at hand.
            let result = result.and_then(|value| {
                plan.sealer
                    .open(Field::ReturnValue, value)
                    .map_err(|e| (format!("the return value: {e}"), false))
            });
            match result {
                Ok(value) => return (made, InlineOutcome::Completed { value }),
                Err((reason, retryable)) if !retryable || made >= attempts => {
                    return (made, InlineOutcome::Failed { reason });
                }
                Err(_) => {}
            }
        }
    }
}
