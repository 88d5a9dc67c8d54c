//! The operator's actions. Each is a POST the guard has let through (an operator, from
//! the dashboard's own origin), is logged on the audit target, and answers with a
//! redirect to the page it came from, or with a page that says why it could not be done.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect};
use axum::Extension;

use super::html::url_segment;
use super::{Access, Base, PageResult, Problem, Shared, AUDIT_TARGET};

/// `POST /queues/{queue}/jobs/{id}/{retry|promote|remove}`.
pub(super) async fn on_job(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, id, action)): Path<(String, String, String)>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let outcome = match action.as_str() {
        "retry" => queue.retry(&id).await,
        "promote" => queue.promote(&id).await,
        "remove" => match queue.remove(&id).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(None),
            Err(e) => Err(Some(e)),
        }
        .map_err(|e| {
            e.unwrap_or_else(|| queue_core::Error::Locked {
                queue: name.clone(),
                id: id.clone(),
                detail: "a worker is running it; cancel it first".to_owned(),
            })
        }),
        other => return Err(unknown_action(other, "retry, promote, remove")),
    };
    audit(&access, &action, &name, Some(&id), &outcome);
    let job_page = format!(
        "{}/queues/{}/jobs/{}",
        base.as_str(),
        url_segment(&name),
        url_segment(&id)
    );
    let queue_page = format!("{}/queues/{}", base.as_str(), url_segment(&name));
    outcome?;
    // A removed job has no page left to show.
    let to = if action == "remove" {
        queue_page
    } else {
        job_page
    };
    Ok(Redirect::to(&to).into_response())
}

/// `POST /queues/{queue}/actions/{pause|resume|retry-failed|promote-delayed}`.
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
        other => {
            return Err(unknown_action(
                other,
                "pause, resume, retry-failed, promote-delayed",
            ))
        }
    };
    audit(&access, &action, &name, None, &outcome);
    outcome?;
    Ok(Redirect::to(&format!("{}/queues/{}", base.as_str(), url_segment(&name))).into_response())
}

fn unknown_action(action: &str, known: &str) -> Problem {
    Problem::BadRequest(format!(
        "`{action}` is not an action here; the actions are: {known}."
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
