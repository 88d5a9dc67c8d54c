//! `/{queue}/jobs/{id}/{retry|promote|remove}`: an action on one job, and its
//! confirmation.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect};
use axum::Extension;
use queue_axum::access::Access;

use crate::audit::{audit, Subject};
use crate::base::Base;
use crate::problem::{job_id, PageResult, Problem};
use crate::query::{Fields, JobAction};
use crate::state::Shared;
use crate::view;

/// `GET`: what the action on the job will do.
pub(crate) async fn confirm(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, id, action)): Path<(String, String, String)>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let id = job_id(&name, &id)?;
    confirmation(&queue, &access, &base, &name, id, &action).await
}

/// What `action` on job `id` of `queue` (named `name`) would do, from the job's state.
async fn confirmation(
    queue: &queue_core::Queue<serde_json::Value>,
    access: &Access,
    base: &Base,
    name: &str,
    id: &str,
    action: &str,
) -> PageResult {
    let state = queue
        .get_job_state(id)
        .await?
        .ok_or_else(|| Problem::no_job(name, id))?;
    let action = JobAction::parse(action)?;
    Ok(view::confirm::job(base, access.who(), name, id, state, action).into_response())
}

/// `POST`: acts, then goes back to the job's page (the queue's, for a removed job).
pub(crate) async fn act(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, id, action)): Path<(String, String, String)>,
    body: Bytes,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let id = job_id(&name, &id)?;
    if action == "remove" && !Fields::of(&body).confirmed() {
        return confirmation(&queue, &access, &base, &name, id, &action).await;
    }
    let outcome = on(&queue, &name, id, JobAction::parse(&action)?).await;
    audit(&access, &action, &name, Subject::Job(id), &outcome);
    outcome?;
    // A removed job has no page left to show.
    let to = if action == "remove" {
        base.queue(&name)
    } else {
        base.job(&name, id)
    };
    Ok(Redirect::to(&to).into_response())
}

/// Does `action` to job `id` of `queue` (named `name`); bulk actions too.
pub(crate) async fn on(
    queue: &queue_core::Queue<serde_json::Value>,
    name: &str,
    id: &str,
    action: JobAction,
) -> Result<(), queue_core::Error> {
    match action {
        JobAction::Retry => queue.retry(id).await,
        JobAction::Promote => queue.promote(id).await,
        JobAction::Remove => {
            // BullMQ's removal answers alike for a job it removed and for an id that
            // names nothing, so the dashboard answered a removal of a missing job with
            // a redirect and audited it as done. It reads the state first, as retry and
            // promote do: a missing job is the same not-found (404, audited as
            // failed). A job gone between the two reads was removed, by whoever.
            if queue.get_job_state(id).await?.is_none() {
                return Err(queue_core::Error::JobNotFound {
                    queue: name.to_owned(),
                    id: id.to_owned(),
                });
            }
            if queue.remove(id).await? {
                Ok(())
            } else {
                Err(queue_core::Error::Locked {
                    queue: name.to_owned(),
                    id: id.to_owned(),
                    detail: "a worker is running it; cancel it first".to_owned(),
                })
            }
        }
    }
}
