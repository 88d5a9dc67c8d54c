//! `/{queue}`: a queue's counts, its operator's actions, and one state's jobs (or a
//! search's matches). Redis: the counts, the pause flag and one listing script.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect};
use axum::Extension;
use maud::{html, Markup};
use queue_core::{job::JobCounts, JobState};

use super::listing::{Listing, QueueQuery};
use super::{unavailable_notice, LISTED};
use crate::view::format::{url_segment, Clip};
use crate::view::{self, widgets};
use crate::{Access, Base, PageResult, Shared};

pub(crate) async fn page(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
    Query(query): Query<QueueQuery>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let here = base.queue(&name);
    if let Some(id) = query
        .id
        .as_deref()
        .map(str::trim)
        .filter(|id| !id.is_empty())
    {
        return Ok(Redirect::to(&format!("{here}/jobs/{}", url_segment(id))).into_response());
    }
    let listing = Listing::of(&query)?;
    let (counts, paused, found) = tokio::try_join!(
        queue.get_job_counts(),
        queue.is_paused(),
        listing.fetch(&queue),
    )?;
    let bulk = access.can_act() && bulk_actions(listing.state).next().is_some();
    let body = html! {
        h1 {
            (Clip(&name, 80))
            @if paused { " " span.chip.bad { "paused" } }
        }
        nav.sub {
            a href={ (here) "/schedulers" } { "schedulers" }
            a href=(base.groups(&name)) { "groups" }
            a href={ (base.workers()) "?queue=" (url_segment(&name)) } { "workers" }
        }
        @if access.can_act() { (queue_actions(&here, paused, &counts)) }
        form method="get" action=(here) {
            input name="id" placeholder="job id" aria-label="job id";
            " " button { "Find" }
        }
        nav.tabs {
            @for listed in LISTED {
                a.on[listed == listing.state] href={ (here) "?state=" (listed.as_str()) } {
                    (listed.as_str()) " " span data-count=(listed.as_str()) { (counts.of(listed)) }
                }
            }
        }
        form method="get" action=(here) {
            input type="hidden" name="state" value=(listing.state.as_str());
            input name="q" size="32" placeholder="id prefix, name = welcome, data.user_id = 42"
                aria-label="search" value=(listing.search_text());
            " "
            select name="order" aria-label="order" {
                option value="newest" selected[!listing.oldest_first()] { "newest first" }
                option value="oldest" selected[listing.oldest_first()] { "oldest first" }
            }
            " " button { "Show" }
        }
        @if bulk {
            form #bulk method="post" action={ (here) "/bulk" } {
                div.actions {
                    input type="hidden" name="state" value=(listing.state.as_str());
                    @for (action, label) in bulk_actions(listing.state) {
                        button.danger[action == "remove"] name="action" value=(action) { (label) }
                    }
                }
            }
        }
        // What the page's script keeps live: the counts above, and the state of each
        // listed job that moves (sent by the server; the page is not fetched again).
        div data-live={ (here) "/live" } data-state=(listing.state.as_str()) {
            (unavailable_notice())
            p.muted.live-note data-changed hidden {
                "Jobs have moved since this page was read: " a href="" { "read it again" } "."
            }
            (listing.render(&found, &here, &base, &name, counts.of(listing.state), bulk))
        }
    };
    Ok(view::page(&base, &name, access.who(), body).into_response())
}

/// What an operator may do to the jobs selected in a list of `state`.
fn bulk_actions(state: JobState) -> impl Iterator<Item = (&'static str, &'static str)> {
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

/// The operator's buttons for a whole queue; the destructive ones lead to a
/// confirmation page that says how many jobs they touch.
fn queue_actions(here: &str, paused: bool, counts: &JobCounts) -> Markup {
    let action = |a: &str| format!("{here}/actions/{a}");
    html! {
        div.actions {
            @if paused {
                (widgets::post_button(&action("resume"), "Resume", false))
            } @else {
                (widgets::post_button(&action("pause"), "Pause", true))
            }
            @if counts.failed > 0 {
                (widgets::confirm_link(&action("retry-failed"), "Retry all failed"))
            }
            @if counts.delayed > 0 {
                (widgets::post_button(&action("promote-delayed"), "Promote all delayed", false))
            }
            (widgets::confirm_link(&action("drain"), "Drain waiting"))
            (widgets::confirm_link(&action("obliterate"), "Obliterate"))
            a href={ (here) "/add" } { "Add a job" }
            form.inline method="get" action=(action("clean")) {
                select name="state" aria-label="state to clean" {
                    option { "completed" } option { "failed" } option { "delayed" } option { "waiting" }
                }
                " older than "
                input name="older_than_s" value="3600" size="6" aria-label="seconds";
                " s "
                button.danger { "Clean…" }
            }
        }
    }
}
