//! `/{queue}/bulk` with `action` (retry, promote, remove), `state` (the list it came
//! from) and `id` once per selected job; which of them a list offers; and the
//! confirmation of a removal.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect};
use axum::Extension;
use queue_axum::access::Access;
use queue_core::JobState;

use super::job;
use crate::audit::{audit, Subject};
use crate::base::Base;
use crate::limits::BULK_MAX;
use crate::problem::{job_id, PageResult, Problem};
use crate::query::{Fields, JobAction};
use crate::state::Shared;
use crate::view;

/// The actions (form value and button label) a list of `state` offers on the jobs
/// selected in it.
pub(crate) fn offered(state: JobState) -> impl Iterator<Item = (&'static str, &'static str)> {
    let retry = matches!(state, JobState::Failed | JobState::Completed);
    let promote = state == JobState::Delayed;
    let remove = state != JobState::Active;
    [
        retry.then_some(("retry", "Retry selected")),
        promote.then_some(("promote", "Promote selected")),
        remove.then_some(("remove", "Remove selected")),
    ]
    .into_iter()
    .flatten()
}

/// `POST`: each job is acted on, and audited, by itself; the first refusal stops the
/// rest and says which job. A removal without `confirm=yes` answers its confirmation.
pub(crate) async fn act(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
    body: Bytes,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let fields = Fields::of(&body);
    let action = fields.get("action").unwrap_or_default().to_owned();
    let state = fields
        .get("state")
        .and_then(|s| s.parse::<JobState>().ok())
        .unwrap_or(JobState::Waiting);
    let ids = fields.all("id");
    if ids.is_empty() {
        return Err(Problem::BadRequest("No job was selected.".to_owned()));
    }
    if ids.len() > BULK_MAX {
        return Err(Problem::BadRequest(format!(
            "At most {BULK_MAX} jobs at once."
        )));
    }
    for id in &ids {
        job_id(&name, id)?;
    }
    if action == "remove" && !fields.confirmed() {
        let page = view::confirm::bulk_remove(&base, access.who(), &name, state.as_str(), &ids);
        return Ok(page.into_response());
    }
    let verb = JobAction::parse(&action)?;
    for id in &ids {
        let outcome = job::on(&queue, &name, id, verb).await;
        audit(&access, &action, &name, Subject::Job(id), &outcome);
        outcome?;
    }
    Ok(Redirect::to(&format!("{}?state={}", base.queue(&name), state.as_str())).into_response())
}
