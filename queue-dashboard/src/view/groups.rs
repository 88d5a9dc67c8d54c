//! A queue's fair groups by id, a page at a time: each group's waiting and running
//! jobs, whether it is paused, the limits of its own, and pause or resume for an
//! operator.

use axum::response::Html;
use maud::{html, Markup};
use queue_axum::access::Access;
use queue_core::group::GroupInfo;

use super::format::{self, Clip};
use super::widgets::{self, sub_page_heading};
use crate::base::Base;
use crate::limits::LISTED_CHARS;
use crate::load::groups::GroupsPage;
use crate::query::Cursor;

/// Queue `name`'s groups page at `cursor`.
pub(crate) fn page(
    base: &Base,
    access: &Access,
    name: &str,
    cursor: &Cursor,
    read: &GroupsPage,
) -> Html<String> {
    let here = base.groups(name);
    let (groups, next) = (&read.groups, &read.next);
    let body = html! {
        (sub_page_heading(&base.queue(name), name, "groups"))
        @if groups.is_empty() && cursor.after.is_none() {
            p {
                "This queue has no groups. A group is listed while it has jobs waiting or "
                "running, or a pause or limits of its own; a job joins one with "
                code { "JobOptions::group" } " when a worker started with "
                code { "Processor::groups" } " takes it."
            }
        } @else if groups.is_empty() {
            p.muted { "No more groups." }
        } @else {
            table {
                thead {
                    tr {
                        th { "group" } th.n { "waiting" } th.n { "active" } th { "paused" }
                        th { "concurrency" } th { "rate" } th {}
                    }
                }
                tbody {
                    @for group in groups { (group_row(group, &here, cursor, access.can_act())) }
                }
            }
            p.muted {
                "A limit shown as " em { "queue's" } " is the one every group of the queue "
                "has: what its workers were started with."
            }
        }
        p.muted {
            (groups.len()) " groups on this page, by id"
            @if cursor.after.is_some() {
                " · " a href=(cursor.link_after(&here, None)) { "first page" }
            }
            @if let Some(next) = next {
                " · " a rel="next" href=(cursor.link_after(&here, Some(next))) { "next" }
            }
        }
    };
    super::page(base, &format!("{name} groups"), access.who(), body)
}

fn group_row(group: &GroupInfo, here: &str, cursor: &Cursor, can_act: bool) -> Markup {
    let own = |limit: Option<String>| match limit {
        Some(limit) => html! { (limit) },
        None => html! { span.muted { em { "queue's" } } },
    };
    let concurrency = group
        .limits
        .get_concurrency()
        .map(|n| format!("{n} at once"));
    let rate = group
        .limits
        .get_rate()
        .map(|(max, per)| format!("{max} per {}", format::duration(format::millis(&per))));
    html! {
        tr {
            td {
                @if group.id.is_empty() {
                    span.muted title="the jobs added without a group" { "(no group)" }
                } @else {
                    (Clip(&group.id, LISTED_CHARS))
                }
            }
            td.n { (group.waiting) }
            td.n { (group.active) }
            td { @if group.paused { span.chip.bad { "paused" } } }
            td { (own(concurrency)) }
            td { (own(rate)) }
            td {
                // The jobs without a group are no group to pause: pausing the queue
                // stops them.
                @if can_act && !group.id.is_empty() {
                    @let fields = cursor.fields(&group.id);
                    @if group.paused {
                        (widgets::post_button_with(&format!("{here}/resume"), "Resume", false, &fields))
                    } @else {
                        (widgets::post_button_with(&format!("{here}/pause"), "Pause", true, &fields))
                    }
                }
            }
        }
    }
}
