//! The confirmation pages: a destructive action (drain, clean, remove, obliterate,
//! retry all) is a POST that carries `confirm=yes`, sent from a page that says what it
//! will do and how many jobs it touches. A link leads there (a `GET` of the action's
//! own address); a POST without the confirmation answers the same page.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use maud::{html, Markup};
use queue_core::JobState;
use serde::Deserialize;

use super::view::format::{self, Clip};
use super::view::{self, widgets};
use super::{job_id, Access, Base, PageResult, Problem, Shared};

/// The form field that says the operator confirmed.
pub(super) const CONFIRM: (&str, &str) = ("confirm", "yes");

/// `GET /{queue}/jobs/{id}/{action}`: what the action on the job will do.
pub(super) async fn job_action(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, id, action)): Path<(String, String, String)>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let id = job_id(&name, &id)?;
    let state = queue
        .get_job_state(id)
        .await?
        .ok_or_else(|| Problem::no_job(&name, id))?;
    let (verb, danger) = match action.as_str() {
        "remove" => ("Remove", true),
        "retry" => ("Retry", false),
        "promote" => ("Promote", false),
        other => {
            return Err(super::actions::unknown_action(
                other,
                "retry, promote, remove",
            ))
        }
    };
    let body = html! {
        p {
            (verb) " job " a href=(base.job(&name, id)) { (Clip(id, 200)) }
            " (" (widgets::state_chip(state)) ") of queue " (Clip(&name, 200)) "? This touches 1 job."
            @if danger { " It cannot be undone." }
        }
    };
    Ok(page(
        &base,
        &access,
        &name,
        verb,
        body,
        &base.job(&name, id),
        danger,
        &[],
    ))
}

/// `GET /{queue}/actions/{action}`: what a whole-queue action will do, with the count.
pub(super) async fn queue_action(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, action)): Path<(String, String)>,
) -> PageResult {
    queue_action_page(&shared, &access, &base, &name, &action).await
}

/// The confirmation of `action` on queue `name`.
pub(super) async fn queue_action_page(
    shared: &Shared,
    access: &Access,
    base: &Base,
    name: &str,
    action: &str,
) -> PageResult {
    let queue = shared.queue(name)?;
    let counts = queue.get_job_counts().await?;
    let queue_html = Clip(name, 200);
    let (verb, danger, body) = match action {
        "drain" => (
            "Drain",
            true,
            html! { p { "Remove the " strong { (counts.waiting + counts.prioritized) } " waiting and prioritized jobs of " (queue_html) "? Delayed, running and finished jobs stay. It cannot be undone." } },
        ),
        "retry-failed" => (
            "Retry all failed",
            false,
            html! { p { "Move the " strong { (counts.failed) } " failed jobs of " (queue_html) " back to waiting, to run again?" } },
        ),
        "obliterate" => (
            "Obliterate",
            true,
            html! {
                p { "Delete queue " (queue_html) " and every one of its " strong { (JobState::ALL.iter().map(|s| counts.of(*s)).sum::<u64>()) } " jobs, its schedulers and its settings? It cannot be undone. Refused while jobs run." }
                p { label { "Type the queue's name to confirm: " input name="queue" form="confirm" required autocomplete="off"; } }
            },
        ),
        "pause" => (
            "Pause",
            false,
            html! { p { "Pause " (queue_html) ": workers take no new jobs until it is resumed." } },
        ),
        "resume" => ("Resume", false, html! { p { "Resume " (queue_html) "." } }),
        "promote-delayed" => (
            "Promote all delayed",
            false,
            html! { p { "Run the " strong { (counts.delayed) } " delayed jobs of " (queue_html) " now?" } },
        ),
        other => {
            return Err(super::actions::unknown_action(
                other,
                "pause, resume, retry-failed, promote-delayed, drain, clean, obliterate",
            ))
        }
    };
    Ok(page(
        base,
        access,
        name,
        verb,
        body,
        &base.queue(name),
        danger,
        &[],
    ))
}

/// The clean form's query.
#[derive(Debug, Deserialize)]
pub(super) struct CleanQuery {
    state: Option<String>,
    older_than_s: Option<String>,
}

/// `GET /{queue}/actions/clean?state=..&older_than_s=..`: what a clean will remove.
pub(super) async fn clean(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
    Query(query): Query<CleanQuery>,
) -> PageResult {
    let (state, age) = super::actions::clean_args(
        query.state.as_deref().unwrap_or_default(),
        query.older_than_s.as_deref().unwrap_or_default(),
    )?;
    clean_page(&shared, &access, &base, &name, state, age).await
}

/// The confirmation of a clean of `state` older than `age` seconds.
pub(super) async fn clean_page(
    shared: &Shared,
    access: &Access,
    base: &Base,
    name: &str,
    state: JobState,
    age: u64,
) -> PageResult {
    let queue = shared.queue(name)?;
    let (counts, exact) = tokio::try_join!(
        queue.get_job_counts(),
        queue.count_older_than(state, std::time::Duration::from_secs(age)),
    )?;
    let older = format::duration(age.saturating_mul(1000));
    let body = html! {
        p {
            @match exact {
                Some(n) => {
                    "Remove the " strong { (n) } " " (state.as_str()) " jobs of " (Clip(name, 200))
                    " that finished more than " (older) " ago (of " (counts.of(state)) ")?"
                },
                None => {
                    "Remove the " (state.as_str()) " jobs of " (Clip(name, 200)) " older than "
                    (older) "? Of the " strong { (counts.of(state)) } " " (state.as_str())
                    " jobs, those older go."
                },
            }
            " It cannot be undone."
        }
    };
    let fields = [
        ("state", state.as_str().to_owned()),
        ("older_than_s", age.to_string()),
    ];
    Ok(page(
        base,
        access,
        name,
        "Clean",
        body,
        &base.queue(name),
        true,
        &fields,
    ))
}

/// The confirmation of removing `ids` (a bulk selection) of queue `name`.
pub(super) fn bulk_remove_page(
    base: &Base,
    access: &Access,
    name: &str,
    state: &str,
    ids: &[String],
) -> Response {
    let body = html! {
        p { "Remove the " strong { (ids.len()) } " selected jobs of " (Clip(name, 200)) "? It cannot be undone." }
        ul { @for id in ids.iter().take(20) { li { (Clip(id, format::LISTED)) } } @if ids.len() > 20 { li.muted { "… " (ids.len() - 20) " more" } } }
    };
    let mut fields: Vec<(&str, String)> =
        vec![("action", "remove".to_owned()), ("state", state.to_owned())];
    fields.extend(ids.iter().map(|id| ("id", id.clone())));
    page(
        base,
        access,
        name,
        "Remove selected",
        body,
        &format!("{}?state={state}", base.queue(name)),
        true,
        &fields,
    )
    .into_response()
}

/// A confirmation page: what will happen, a form that POSTs to the address it was asked
/// at with `confirm=yes` and `fields`, and the way back.
#[allow(clippy::too_many_arguments)]
fn page(
    base: &Base,
    access: &Access,
    queue: &str,
    verb: &str,
    what: Markup,
    back: &str,
    danger: bool,
    fields: &[(&str, String)],
) -> Response {
    let body = html! {
        h1 { a href=(base.queue(queue)) { (Clip(queue, 80)) } " · " (verb) "?" }
        div.confirm {
            (what)
            form #confirm method="post" {
                @for (name, value) in fields { input type="hidden" name=(name) value=(value); }
                input type="hidden" name=(CONFIRM.0) value=(CONFIRM.1);
                button.danger[danger] { (verb) }
                " " a href=(back) { "Cancel" }
            }
        }
    };
    view::page(base, &format!("{verb}?"), access.who(), body).into_response()
}
