//! A queue's page: its counts, its operator's actions, and one state's jobs (or a
//! search's matches), kept live by the page's script.

use axum::response::Html;
use maud::{html, Markup};
use queue_axum::access::Access;
use queue_core::job::JobCounts;

use super::format::Clip;
use super::widgets::{self, unavailable_notice};
use crate::base::Base;
use crate::limits::LISTED_STATES;
use crate::load::queue::QueuePage;
use crate::query::Listing;
use crate::text::url_segment;

/// Queue `name`'s page of `listing`; `bulk` the actions an operator may take on the
/// selected jobs (none: no selection).
pub(crate) fn page(
    base: &Base,
    access: &Access,
    name: &str,
    listing: &Listing,
    read: &QueuePage,
    bulk: &[(&str, &str)],
) -> Html<String> {
    let here = base.queue(name);
    let (counts, paused) = (&read.counts, read.paused);
    let body = html! {
        h1 {
            (Clip(name, 80))
            @if paused { " " span.chip.bad { "paused" } }
        }
        nav.sub {
            a href={ (here) "/schedulers" } { "schedulers" }
            a href=(base.groups(name)) { "groups" }
            a href={ (base.workers()) "?queue=" (url_segment(name)) } { "workers" }
        }
        @if access.can_act() { (queue_actions(&here, paused, counts)) }
        form method="get" action=(here) {
            input name="id" placeholder="job id" aria-label="job id";
            " " button { "Find" }
        }
        nav.tabs {
            @for listed in LISTED_STATES {
                a.on[listed == listing.state] href={ (here) "?state=" (listed.as_str()) } {
                    (listed.as_str()) " " span data-count=(listed.as_str()) { (counts.of(listed)) }
                }
            }
        }
        form method="get" action=(here) {
            input type="hidden" name="state" value=(listing.state.as_str());
            input name="q" size="32" placeholder=(search_hint(listing.payload_search))
                aria-label="search" value=(listing.search_text());
            " "
            select name="order" aria-label="order" {
                option value="newest" selected[!listing.oldest_first] { "newest first" }
                option value="oldest" selected[listing.oldest_first] { "oldest first" }
            }
            " " button { "Show" }
        }
        @if !bulk.is_empty() {
            form #bulk method="post" action={ (here) "/bulk" } {
                div.actions {
                    input type="hidden" name="state" value=(listing.state.as_str());
                    @for (action, label) in bulk {
                        button.danger[*action == "remove"] name="action" value=(action) { (label) }
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
            (super::listing::render(
                listing,
                &read.found,
                &here,
                base,
                name,
                counts.of(listing.state),
                !bulk.is_empty(),
            ))
        }
    };
    super::page(base, name, access.who(), body)
}

/// What the search box takes: a payload field only where the application turned it on.
fn search_hint(payload_search: bool) -> &'static str {
    if payload_search {
        "id prefix, name = welcome, data.user_id = 42"
    } else {
        "id prefix, name = welcome"
    }
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
