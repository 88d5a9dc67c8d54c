//! `/{queue}/actions/clean` with `state` and `older_than_s`: removes the jobs of that
//! state older than that; and its confirmation, which counts them.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect};
use axum::Extension;
use queue_axum::access::Access;
use queue_axum::quote;
use queue_core::{JobState, Queue};

use crate::audit::{audit, Subject};
use crate::base::Base;
use crate::problem::{PageResult, Problem};
use crate::query::{CleanQuery, Fields};
use crate::state::Shared;
use crate::text::clip;
use crate::view;

/// The states a clean takes.
const CLEANABLE: [JobState; 4] = [
    JobState::Completed,
    JobState::Failed,
    JobState::Delayed,
    JobState::Waiting,
];

/// The clean form's state and age (seconds), checked.
fn checked(state: &str, older_than_s: &str) -> Result<(JobState, u64), Problem> {
    let parsed = state
        .parse::<JobState>()
        .ok()
        .filter(|s| CLEANABLE.contains(s))
        .ok_or_else(|| {
            Problem::BadRequest(format!(
                "{} cannot be cleaned; use completed, failed, delayed or waiting.",
                quote(&clip(state, 100))
            ))
        })?;
    let age = older_than_s.trim().parse::<u64>().map_err(|_| {
        Problem::BadRequest(format!(
            "{} is not a number of seconds.",
            quote(&clip(older_than_s, 100))
        ))
    })?;
    Ok((parsed, age))
}

/// `GET ?state=..&older_than_s=..`: what the clean will remove.
pub(crate) async fn confirm(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
    Query(query): Query<CleanQuery>,
) -> PageResult {
    let (state, age) = checked(
        query.state.as_deref().unwrap_or_default(),
        query.older_than_s.as_deref().unwrap_or_default(),
    )?;
    let queue = shared.queue(&name)?;
    confirmation(&queue, &access, &base, &name, state, age).await
}

/// What a clean of `queue` (named `name`) would remove, counted.
async fn confirmation(
    queue: &Queue<serde_json::Value>,
    access: &Access,
    base: &Base,
    name: &str,
    state: JobState,
    age: u64,
) -> PageResult {
    let (counts, exact) = tokio::try_join!(
        queue.get_job_counts(),
        queue.count_older_than(state, Duration::from_secs(age)),
    )?;
    Ok(view::confirm::clean(base, access.who(), name, state, age, &counts, exact).into_response())
}

/// `POST` with `confirm=yes`: cleans, then goes to the list of that state.
pub(crate) async fn act(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
    body: Bytes,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let fields = Fields::of(&body);
    let (state, age) = checked(
        fields.get("state").unwrap_or_default(),
        fields.get("older_than_s").unwrap_or_default(),
    )?;
    if !fields.confirmed() {
        return confirmation(&queue, &access, &base, &name, state, age).await;
    }
    let outcome = queue
        .clean(Duration::from_secs(age), 0, state)
        .await
        .map(drop);
    audit(&access, "clean", &name, Subject::Queue, &outcome);
    outcome?;
    Ok(Redirect::to(&format!("{}?state={}", base.queue(&name), state.as_str())).into_response())
}
