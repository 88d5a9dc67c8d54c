//! The confirmation pages: what a destructive action will do and how many jobs it
//! touches, and a form that POSTs it again to the address it was asked at, with
//! `confirm=yes`.

use axum::response::Html;
use maud::{html, Markup};
use queue_core::{job::JobCounts, JobState};

use super::format::{self, Clip};
use super::widgets;
use crate::base::Base;
use crate::limits::LISTED_CHARS;
use crate::query::{JobAction, QueueAction, CONFIRM};

/// The selected jobs a bulk confirmation names; the rest are counted.
const BULK_NAMED: usize = 20;

/// What `action` on job `id` (in `state`) of `queue` will do.
pub(crate) fn job(
    base: &Base,
    who: &str,
    queue: &str,
    id: &str,
    state: JobState,
    action: JobAction,
) -> Html<String> {
    let (verb, danger) = match action {
        JobAction::Remove => ("Remove", true),
        JobAction::Retry => ("Retry", false),
        JobAction::Promote => ("Promote", false),
    };
    let what = html! {
        p {
            (verb) " job " a href=(base.job(queue, id)) { (Clip(id, 200)) }
            " (" (widgets::state_chip(state)) ") of queue " (Clip(queue, 200)) "? This touches 1 job."
            @if danger { " It cannot be undone." }
        }
    };
    let back = base.job(queue, id);
    render(base, who, queue, verb, what, &back, danger, &[])
}

/// What `action` on the whole of `queue` (with these `counts`) will do.
pub(crate) fn queue(
    base: &Base,
    who: &str,
    queue: &str,
    action: QueueAction,
    counts: &JobCounts,
) -> Html<String> {
    let queue_html = Clip(queue, 200);
    let (verb, danger, what) = match action {
        QueueAction::Drain => (
            "Drain",
            true,
            html! { p { "Remove the " strong { (counts.waiting + counts.prioritized) } " waiting and prioritized jobs of " (queue_html) "? Delayed, running and finished jobs stay. It cannot be undone." } },
        ),
        QueueAction::RetryFailed => (
            "Retry all failed",
            false,
            html! { p { "Move the " strong { (counts.failed) } " failed jobs of " (queue_html) " back to waiting, to run again?" } },
        ),
        QueueAction::Obliterate => (
            "Obliterate",
            true,
            html! {
                p { "Delete queue " (queue_html) " and every one of its " strong { (JobState::ALL.iter().map(|s| counts.of(*s)).sum::<u64>()) } " jobs, its schedulers and its settings? It cannot be undone. Refused while jobs run." }
                p { label { "Type the queue's name to confirm: " input name="queue" form="confirm" required autocomplete="off"; } }
            },
        ),
        QueueAction::Pause => (
            "Pause",
            false,
            html! { p { "Pause " (queue_html) ": workers take no new jobs until it is resumed." } },
        ),
        QueueAction::Resume => ("Resume", false, html! { p { "Resume " (queue_html) "." } }),
        QueueAction::PromoteDelayed => (
            "Promote all delayed",
            false,
            html! { p { "Run the " strong { (counts.delayed) } " delayed jobs of " (queue_html) " now?" } },
        ),
    };
    render(
        base,
        who,
        queue,
        verb,
        what,
        &base.queue(queue),
        danger,
        &[],
    )
}

/// What a clean of `queue`'s `state` jobs older than `age` seconds will remove: `exact`
/// of them when Redis could count them, else some of the `counts`.
pub(crate) fn clean(
    base: &Base,
    who: &str,
    queue: &str,
    state: JobState,
    age: u64,
    counts: &JobCounts,
    exact: Option<u64>,
) -> Html<String> {
    let older = format::duration(age.saturating_mul(1000));
    let what = html! {
        p {
            @match exact {
                Some(n) => {
                    "Remove the " strong { (n) } " " (state.as_str()) " jobs of " (Clip(queue, 200))
                    " that finished more than " (older) " ago (of " (counts.of(state)) ")?"
                },
                None => {
                    "Remove the " (state.as_str()) " jobs of " (Clip(queue, 200)) " older than "
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
    render(
        base,
        who,
        queue,
        "Clean",
        what,
        &base.queue(queue),
        true,
        &fields,
    )
}

/// What removing `ids` (a bulk selection from the list of `state`) of `queue` will do.
pub(crate) fn bulk_remove(
    base: &Base,
    who: &str,
    queue: &str,
    state: &str,
    ids: &[String],
) -> Html<String> {
    let what = html! {
        p { "Remove the " strong { (ids.len()) } " selected jobs of " (Clip(queue, 200)) "? It cannot be undone." }
        ul {
            @for id in ids.iter().take(BULK_NAMED) { li { (Clip(id, LISTED_CHARS)) } }
            @if ids.len() > BULK_NAMED { li.muted { "… " (ids.len() - BULK_NAMED) " more" } }
        }
    };
    let mut fields: Vec<(&str, String)> =
        vec![("action", "remove".to_owned()), ("state", state.to_owned())];
    fields.extend(ids.iter().map(|id| ("id", id.clone())));
    let back = format!("{}?state={state}", base.queue(queue));
    render(
        base,
        who,
        queue,
        "Remove selected",
        what,
        &back,
        true,
        &fields,
    )
}

/// A confirmation page: `what` will happen, a form that POSTs to the address it was
/// asked at with `confirm=yes` and `fields`, and the way `back`.
#[allow(clippy::too_many_arguments)]
fn render(
    base: &Base,
    who: &str,
    queue: &str,
    verb: &str,
    what: Markup,
    back: &str,
    danger: bool,
    fields: &[(&str, String)],
) -> Html<String> {
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
    super::page(base, &format!("{verb}?"), who, body)
}
