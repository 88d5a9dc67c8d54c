//! `/{queue}/actions/{pause|resume|retry-failed|promote-delayed|drain|obliterate}`: an
//! action on a whole queue, and its confirmation.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect};
use axum::Extension;
use queue_axum::access::Access;
use queue_core::Queue;

use crate::audit::{audit, Subject};
use crate::base::Base;
use crate::problem::PageResult;
use crate::query::{Fields, QueueAction};
use crate::state::Shared;
use crate::view;

/// `GET`: what the action will do, with the count of jobs it touches.
pub(crate) async fn confirm(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, action)): Path<(String, String)>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let action = QueueAction::parse(&action)?;
    confirmation(&queue, &access, &base, &name, action).await
}

/// The confirmation of `action` on `queue` (named `name`), with its counts.
async fn confirmation(
    queue: &Queue<serde_json::Value>,
    access: &Access,
    base: &Base,
    name: &str,
    action: QueueAction,
) -> PageResult {
    let counts = queue.get_job_counts().await?;
    Ok(view::confirm::queue(base, access.who(), name, action, &counts).into_response())
}

/// `POST`: acts, then goes back to the queue's page.
pub(crate) async fn act(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, action)): Path<(String, String)>,
    body: Bytes,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let verb = QueueAction::parse(&action)?;
    let fields = Fields::of(&body);
    // Obliterating asks for the queue's name as well: one mistaken tab is not enough.
    let named = verb != QueueAction::Obliterate || fields.get("queue") == Some(name.as_str());
    if verb.destructive() && !(fields.confirmed() && named) {
        return confirmation(&queue, &access, &base, &name, verb).await;
    }
    let outcome = match verb {
        QueueAction::Pause => queue.pause().await,
        QueueAction::Resume => queue.resume().await,
        QueueAction::RetryFailed => queue.retry_failed().await,
        QueueAction::PromoteDelayed => queue.promote_all().await,
        QueueAction::Drain => queue.drain(false).await,
        QueueAction::Obliterate => queue.obliterate(false).await,
    };
    audit(&access, &action, &name, Subject::Queue, &outcome);
    outcome?;
    Ok(Redirect::to(&base.queue(&name)).into_response())
}
