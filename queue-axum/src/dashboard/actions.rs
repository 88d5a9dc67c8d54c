//! The operator's actions. Each is a POST the guard has let through (an operator, from
//! the dashboard's own origin), is logged on the audit target, and answers with a
//! redirect to the page it came from, or with a page that says why it could not be done.

use std::sync::Arc;

use axum::extract::rejection::FormRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect};
use axum::Extension;
use axum::Form;
use queue_core::JobState;
use serde::Deserialize;

use super::{job_id, Access, Base, PageResult, Problem, Shared, AUDIT_TARGET};
use crate::quote;

/// `POST /queues/{queue}/jobs/{id}/{retry|promote|remove}`.
pub(super) async fn on_job(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, id, action)): Path<(String, String, String)>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let id = job_id(&name, &id)?;
    let outcome = match action.as_str() {
        "retry" => queue.retry(id).await,
        "promote" => queue.promote(id).await,
        "remove" => match queue.remove(id).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(None),
            Err(e) => Err(Some(e)),
        }
        .map_err(|e| {
            e.unwrap_or_else(|| queue_core::Error::Locked {
                queue: name.clone(),
                id: id.to_owned(),
                detail: "a worker is running it; cancel it first".to_owned(),
            })
        }),
        other => return Err(unknown_action(other, "retry, promote, remove")),
    };
    audit(&access, &action, &name, Some(id), &outcome);
    outcome?;
    // A removed job has no page left to show.
    let to = if action == "remove" {
        base.queue_page(&name)
    } else {
        base.job_page(&name, id)
    };
    Ok(Redirect::to(&to).into_response())
}

/// `POST /queues/{queue}/actions/{pause|resume|retry-failed|promote-delayed|drain}`.
pub(super) async fn on_queue(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, action)): Path<(String, String)>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let outcome = match action.as_str() {
        "pause" => queue.pause().await,
        "resume" => queue.resume().await,
        "retry-failed" => queue.retry_failed().await,
        "promote-delayed" => queue.promote_all().await,
        "drain" => queue.drain(false).await,
        other => {
            return Err(unknown_action(
                other,
                "pause, resume, retry-failed, promote-delayed, drain, clean",
            ))
        }
    };
    audit(&access, &action, &name, None, &outcome);
    outcome?;
    Ok(Redirect::to(&base.queue_page(&name)).into_response())
}

/// The clean form: which state, and how old a job must be to go.
#[derive(Debug, Deserialize)]
pub(super) struct CleanForm {
    state: String,
    older_than_s: String,
}

/// The states `clean` takes.
const CLEANABLE: [JobState; 4] = [
    JobState::Completed,
    JobState::Failed,
    JobState::Delayed,
    JobState::Waiting,
];

/// `POST /queues/{queue}/actions/clean` with `state` and `older_than_s`: removes the
/// jobs of that state older than that.
pub(super) async fn clean(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
    form: Result<Form<CleanForm>, FormRejection>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let Form(form) = form.map_err(|e| Problem::BadRequest(e.body_text()))?;
    let state = form
        .state
        .parse::<JobState>()
        .ok()
        .filter(|s| CLEANABLE.contains(s))
        .ok_or_else(|| {
            Problem::BadRequest(format!(
                "{} cannot be cleaned; use completed, failed, delayed or waiting.",
                quote(&form.state)
            ))
        })?;
    let age = form.older_than_s.trim().parse::<u64>().map_err(|_| {
        Problem::BadRequest(format!(
            "{} is not a number of seconds.",
            quote(&form.older_than_s)
        ))
    })?;
    let outcome = queue
        .clean(std::time::Duration::from_secs(age), 0, state)
        .await
        .map(drop);
    audit(&access, "clean", &name, None, &outcome);
    outcome?;
    Ok(Redirect::to(&format!(
        "{}?state={}",
        base.queue_page(&name),
        state.as_str()
    ))
    .into_response())
}

fn unknown_action(action: &str, known: &str) -> Problem {
    Problem::BadRequest(format!(
        "{} is not an action here; the actions are: {known}.",
        quote(action)
    ))
}

/// `POST /queues/{queue}/schedulers/{id}/{run|remove}`: run a scheduler's next job now
/// (its waiting job is promoted), or remove the scheduler.
pub(super) async fn on_scheduler(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, id, action)): Path<(String, String, String)>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let outcome = match action.as_str() {
        "run" => {
            let next = queue
                .get_scheduler(&id)
                .await?
                .ok_or_else(|| no_scheduler(&id, &name))?
                .next_job_id()
                .ok_or_else(|| {
                    Problem::BadRequest(format!(
                        "Scheduler {} has no next run to start.",
                        quote(&id)
                    ))
                })?;
            queue.promote(&next).await
        }
        "remove" => match queue.remove_scheduler(&id).await {
            Ok(true) => Ok(()),
            Ok(false) => return Err(no_scheduler(&id, &name)),
            Err(e) => Err(e),
        },
        other => return Err(unknown_action(other, "run, remove")),
    };
    audit(
        &access,
        &format!("scheduler-{action}"),
        &name,
        Some(&id),
        &outcome,
    );
    outcome?;
    Ok(Redirect::to(&format!("{}/schedulers", base.queue_page(&name))).into_response())
}

fn no_scheduler(id: &str, queue: &str) -> Problem {
    Problem::NotFound(format!(
        "No scheduler {} in queue {}.",
        quote(id),
        quote(queue)
    ))
}

/// One line per action: who did what to which queue and job, and how it went.
fn audit(
    access: &Access,
    action: &str,
    queue: &str,
    job_id: Option<&str>,
    outcome: &Result<(), queue_core::Error>,
) {
    match outcome {
        Ok(()) => tracing::info!(
            target: AUDIT_TARGET,
            who = access.who(),
            action,
            queue,
            job_id,
            "dashboard action"
        ),
        Err(error) => tracing::warn!(
            target: AUDIT_TARGET,
            who = access.who(),
            action,
            queue,
            job_id,
            %error,
            "dashboard action failed"
        ),
    }
}
