//! `/{queue}/groups/{pause|resume}` with `group`, and the page's `after` and `count` to
//! go back to: stops a group's jobs from starting, or lets them start again.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect};
use axum::Extension;
use queue_axum::access::Access;

use crate::audit::{audit, Subject};
use crate::base::Base;
use crate::problem::{PageResult, Problem};
use crate::query::{Cursor, Fields};
use crate::state::Shared;

/// `POST`: acts, then goes back to the groups page it came from.
pub(crate) async fn act(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, action)): Path<(String, String)>,
    body: Bytes,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let fields = Fields::of(&body);
    let group = fields
        .get("group")
        .ok_or_else(|| Problem::BadRequest("No group was named.".to_owned()))?;
    let back = Cursor::checked(fields.get("after"), fields.get("count"))?;
    let outcome = match action.as_str() {
        "pause" => queue.pause_group(group).await,
        "resume" => queue.resume_group(group).await,
        other => return Err(Problem::unknown_action(other, "pause, resume")),
    };
    audit(
        &access,
        &format!("{action}-group"),
        &name,
        Subject::Group(group),
        &outcome,
    );
    outcome?;
    Ok(Redirect::to(&back.link(&base.groups(&name))).into_response())
}
