//! The operator's actions. Each is a POST the guard has let through (an operator, from
//! the dashboard's own origin), is logged on the audit target, and answers with a
//! redirect to the page it came from, or with a page that says why it could not be done.
//! A destructive one without `confirm=yes` answers its confirmation page instead.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect};
use axum::Extension;
use queue_core::JobState;

use super::confirm::{self, CONFIRM};
use super::pages::groups::Cursor;
use super::view::format::clip;
use super::{job_id, Access, Base, PageResult, Problem, Shared, AUDIT_TARGET, PAGE_SIZE};
use queue_axum::quote;

/// A urlencoded form body, read leniently: an empty body or none is no fields.
struct Fields(Vec<(String, String)>);

impl Fields {
    fn of(body: &Bytes) -> Fields {
        Fields(form_urlencoded::parse(body).into_owned().collect())
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .collect()
    }

    fn confirmed(&self) -> bool {
        self.get(CONFIRM.0) == Some(CONFIRM.1)
    }
}

/// `POST /{queue}/jobs/{id}/{retry|promote|remove}`.
pub(super) async fn on_job(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, id, action)): Path<(String, String, String)>,
    body: Bytes,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let id = job_id(&name, &id)?;
    if action == "remove" && !Fields::of(&body).confirmed() {
        return confirm::job_action(
            State(shared),
            Extension(access),
            base,
            Path((name, id.to_owned(), action)),
        )
        .await;
    }
    let outcome = match action.as_str() {
        "retry" => queue.retry(id).await,
        "promote" => queue.promote(id).await,
        "remove" => remove(&queue, &name, id).await,
        other => return Err(unknown_action(other, "retry, promote, remove")),
    };
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

async fn remove(
    queue: &queue_core::Queue<serde_json::Value>,
    name: &str,
    id: &str,
) -> Result<(), queue_core::Error> {
    match queue.remove(id).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(queue_core::Error::Locked {
            queue: name.to_owned(),
            id: id.to_owned(),
            detail: "a worker is running it; cancel it first".to_owned(),
        }),
        Err(e) => Err(e),
    }
}

/// `POST /{queue}/actions/{pause|resume|retry-failed|promote-delayed|drain|obliterate}`.
pub(super) async fn on_queue(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, action)): Path<(String, String)>,
    body: Bytes,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let fields = Fields::of(&body);
    let destructive = matches!(action.as_str(), "retry-failed" | "drain" | "obliterate");
    // Obliterating asks for the queue's name as well: one mistaken tab is not enough.
    let named = action != "obliterate" || fields.get("queue") == Some(name.as_str());
    if destructive && !(fields.confirmed() && named) {
        return confirm::queue_action_page(&shared, &access, &base, &name, &action).await;
    }
    let outcome = match action.as_str() {
        "pause" => queue.pause().await,
        "resume" => queue.resume().await,
        "retry-failed" => queue.retry_failed().await,
        "promote-delayed" => queue.promote_all().await,
        "drain" => queue.drain(false).await,
        "obliterate" => queue.obliterate(false).await,
        other => {
            return Err(unknown_action(
                other,
                "pause, resume, retry-failed, promote-delayed, drain, clean, obliterate",
            ))
        }
    };
    audit(&access, &action, &name, Subject::Queue, &outcome);
    outcome?;
    Ok(Redirect::to(&base.queue(&name)).into_response())
}

/// The states `clean` takes.
const CLEANABLE: [JobState; 4] = [
    JobState::Completed,
    JobState::Failed,
    JobState::Delayed,
    JobState::Waiting,
];

/// The clean form's state and age (seconds), checked.
pub(super) fn clean_args(state: &str, older_than_s: &str) -> Result<(JobState, u64), Problem> {
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

/// `POST /{queue}/actions/clean` with `state`, `older_than_s` and `confirm=yes`:
/// removes the jobs of that state older than that.
pub(super) async fn clean(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
    body: Bytes,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let fields = Fields::of(&body);
    let (state, age) = clean_args(
        fields.get("state").unwrap_or_default(),
        fields.get("older_than_s").unwrap_or_default(),
    )?;
    if !fields.confirmed() {
        return confirm::clean_page(&shared, &access, &base, &name, state, age).await;
    }
    let outcome = queue
        .clean(std::time::Duration::from_secs(age), 0, state)
        .await
        .map(drop);
    audit(&access, "clean", &name, Subject::Queue, &outcome);
    outcome?;
    Ok(Redirect::to(&format!("{}?state={}", base.queue(&name), state.as_str())).into_response())
}

/// The most jobs one bulk action takes: a page's worth, with room.
const BULK_MAX: usize = PAGE_SIZE * 4;

/// `POST /{queue}/bulk` with `action` (retry, promote, remove), `state` (the list it
/// came from) and `id` once per selected job. Each job is acted on, and audited, by
/// itself; the first refusal stops the rest and says which job.
pub(super) async fn bulk(
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
        return Ok(confirm::bulk_remove_page(
            &base,
            &access,
            &name,
            state.as_str(),
            &ids,
        ));
    }
    for id in &ids {
        let outcome = match action.as_str() {
            "retry" => queue.retry(id).await,
            "promote" => queue.promote(id).await,
            "remove" => remove(&queue, &name, id).await,
            other => return Err(unknown_action(other, "retry, promote, remove")),
        };
        audit(&access, &action, &name, Subject::Job(id), &outcome);
        outcome?;
    }
    Ok(Redirect::to(&format!("{}?state={}", base.queue(&name), state.as_str())).into_response())
}

pub(super) fn unknown_action(action: &str, known: &str) -> Problem {
    Problem::BadRequest(format!(
        "{} is not an action here; the actions are: {known}.",
        quote(&clip(action, 100))
    ))
}

/// `POST /{queue}/schedulers/{id}/{run|remove}`: run a scheduler's next job now
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
        other => return Err(unknown_action(other, "run, remove")),
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

/// `POST /{queue}/groups/{pause|resume}` with `group`, and the page's `after` and
/// `count` to go back to: stops a group's jobs from starting, or lets them start again.
pub(super) async fn on_group(
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
        other => return Err(unknown_action(other, "pause, resume")),
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

fn no_scheduler(id: &str, queue: &str) -> Problem {
    Problem::NotFound(format!(
        "No scheduler {} in queue {}.",
        quote(&clip(id, 200)),
        quote(&clip(queue, 200))
    ))
}

/// What an action touched within its queue, for the audit line.
enum Subject<'a> {
    /// The whole queue.
    Queue,
    /// One job (or scheduler), by id.
    Job(&'a str),
    /// One group, by id.
    Group(&'a str),
}

/// One line per action: who did what to which queue and job or group, and how it went.
fn audit(
    access: &Access,
    action: &str,
    queue: &str,
    subject: Subject<'_>,
    outcome: &Result<(), queue_core::Error>,
) {
    let (job_id, group) = match subject {
        Subject::Queue => (None, None),
        Subject::Job(id) => (Some(id), None),
        Subject::Group(id) => (None, Some(id)),
    };
    match outcome {
        Ok(()) => tracing::info!(
            target: AUDIT_TARGET,
            who = access.who(),
            action,
            queue,
            job_id,
            group,
            "dashboard action"
        ),
        Err(error) => tracing::warn!(
            target: AUDIT_TARGET,
            who = access.who(),
            action,
            queue,
            job_id,
            group,
            %error,
            "dashboard action failed"
        ),
    }
}
