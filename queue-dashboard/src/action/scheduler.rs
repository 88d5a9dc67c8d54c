//! `/{queue}/schedulers/{id}/{run|remove}`: run a scheduler's next job now (its
//! waiting job is promoted), or remove the scheduler.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect};
use axum::Extension;
use queue_axum::access::Access;
use queue_axum::quote;

use crate::audit::{audit, Subject};
use crate::base::Base;
use crate::problem::{PageResult, Problem};
use crate::state::Shared;
use crate::text::clip;

/// `POST`: acts, then goes back to the queue's schedulers.
pub(crate) async fn act(
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
                        quote(&clip(&id, 200))
                    ))
                })?;
            queue.promote(&next).await
        }
        "remove" => match queue.remove_scheduler(&id).await {
            Ok(true) => Ok(()),
            Ok(false) => return Err(no_scheduler(&id, &name)),
            Err(e) => Err(e),
        },
        other => return Err(Problem::unknown_action(other, "run, remove")),
    };
    audit(
        &access,
        &format!("scheduler-{action}"),
        &name,
        Subject::Job(&id),
        &outcome,
    );
    outcome?;
    Ok(Redirect::to(&format!("{}/schedulers", base.queue(&name))).into_response())
}

fn no_scheduler(id: &str, queue: &str) -> Problem {
    Problem::NotFound(format!(
        "No scheduler {} in queue {}.",
        quote(&clip(id, 200)),
        quote(&clip(queue, 200))
    ))
}
