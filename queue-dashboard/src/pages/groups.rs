//! `/{queue}/groups?after=..&count=..`: a queue's fair groups by id, a page at a time:
//! each group's waiting and running jobs, whether it is paused, the limits of its own,
//! and pause or resume for an operator. Redis: one script that reads the page and one
//! group more (whether a next page exists), whatever the number of groups.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use axum::Extension;
use maud::{html, Markup};
use queue_core::group::GroupInfo;
use serde::Deserialize;

use super::sub_page_heading;
use crate::view::format::{self, url_segment, Clip};
use crate::view::{self, widgets};
use crate::{Access, Base, PageResult, Problem, Shared, PAGE_SIZE};
use queue_axum::quote;

/// The most groups one page shows (`count`).
const MAX_COUNT: usize = PAGE_SIZE * 4;

/// The longest `after` taken. Not [`MAX_GROUP_BYTES`](queue_core::options::MAX_GROUP_BYTES):
/// that bounds the ids our producers give, and a Node producer may name a longer group,
/// which a next page must still start after.
const MAX_AFTER_BYTES: usize = 4 * 1024;

/// A groups page's query: `after` (the last group of the page before; the first page
/// without it) and `count` (groups a page, [`PAGE_SIZE`] by default).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct GroupsQuery {
    after: Option<String>,
    count: Option<String>,
}

/// Where a groups page starts and how many groups it shows, checked.
#[derive(Debug)]
pub(crate) struct Cursor {
    after: Option<String>,
    count: usize,
}

impl Cursor {
    /// `after` and `count` as a query or a form gives them. `after` is any group id up
    /// to [`MAX_AFTER_BYTES`]; `""` (the group of the jobs without one, which comes
    /// first) is one.
    pub(crate) fn checked(after: Option<&str>, count: Option<&str>) -> Result<Cursor, Problem> {
        if let Some(after) = after.filter(|a| a.len() > MAX_AFTER_BYTES) {
            return Err(Problem::BadRequest(format!(
                "{} is no group id to start after: a page starts after at most \
                 {MAX_AFTER_BYTES} bytes.",
                quote(&format::clip(after, 100))
            )));
        }
        let count = match count.map(str::parse::<usize>) {
            None => PAGE_SIZE,
            Some(Ok(n)) if (1..=MAX_COUNT).contains(&n) => n,
            Some(_) => {
                return Err(Problem::BadRequest(format!(
                    "`count` is a whole number from 1 to {MAX_COUNT}."
                )))
            }
        };
        Ok(Cursor {
            after: after.map(str::to_owned),
            count,
        })
    }

    /// The address of this page of the groups page at `groups`.
    pub(crate) fn link(&self, groups: &str) -> String {
        self.link_after(groups, self.after.as_deref())
    }

    /// The address of the page that starts after `after`, this page's count kept.
    fn link_after(&self, groups: &str, after: Option<&str>) -> String {
        let after = after.map(|a| format!("after={}", url_segment(a)));
        let count = (self.count != PAGE_SIZE).then(|| format!("count={}", self.count));
        let query: Vec<String> = after.into_iter().chain(count).collect();
        if query.is_empty() {
            groups.to_owned()
        } else {
            format!("{groups}?{}", query.join("&"))
        }
    }

    /// The fields an action's form sends: the group, and this page to come back to.
    fn fields(&self, group: &str) -> Vec<(&'static str, String)> {
        let mut fields = vec![("group", group.to_owned())];
        if let Some(after) = &self.after {
            fields.push(("after", after.clone()));
        }
        if self.count != PAGE_SIZE {
            fields.push(("count", self.count.to_string()));
        }
        fields
    }
}

pub(crate) async fn page(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
    Query(query): Query<GroupsQuery>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let cursor = Cursor::checked(query.after.as_deref(), query.count.as_deref())?;
    // One more than shown: whether a next page exists, without a link to an empty one.
    let mut groups = queue
        .groups(cursor.after.as_deref(), cursor.count + 1)
        .await?
        .groups;
    let next = if groups.len() > cursor.count {
        groups.truncate(cursor.count);
        groups.last().map(|g| g.id.clone())
    } else {
        None
    };
    let here = base.groups(&name);
    let body = html! {
        (sub_page_heading(&base.queue(&name), &name, "groups"))
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
                    @for group in &groups { (group_row(group, &here, &cursor, access.can_act())) }
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
            @if let Some(next) = &next {
                " · " a rel="next" href=(cursor.link_after(&here, Some(next))) { "next" }
            }
        }
    };
    Ok(view::page(&base, &format!("{name} groups"), access.who(), body).into_response())
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
    let rate = group.limits.get_rate().map(|(max, per)| {
        let per = u64::try_from(per.as_millis()).unwrap_or(u64::MAX);
        format!("{max} per {}", format::duration(per))
    });
    html! {
        tr {
            td {
                @if group.id.is_empty() {
                    span.muted title="the jobs added without a group" { "(no group)" }
                } @else {
                    (Clip(&group.id, format::LISTED))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_is_a_group_id_and_a_bounded_count_and_links_keep_it() {
        let first = Cursor::checked(None, None).unwrap();
        assert_eq!(first.link("/q/groups"), "/q/groups");
        let on = Cursor::checked(Some("a b/&é"), Some("10")).unwrap();
        assert_eq!(
            on.link("/q/groups"),
            "/q/groups?after=a%20b%2F%26%C3%A9&count=10"
        );
        assert_eq!(on.link_after("/q/groups", None), "/q/groups?count=10");
        assert_eq!(
            on.fields("g"),
            [
                ("group", "g".to_owned()),
                ("after", "a b/&é".to_owned()),
                ("count", "10".to_owned())
            ]
        );
        // After the jobs without a group is not the first page.
        let after_none = Cursor::checked(Some(""), None).unwrap();
        assert_eq!(after_none.link("/q/groups"), "/q/groups?after=");
        // A Node producer's group id may be longer than ours, or hold a newline.
        let long = "g".repeat(queue_core::options::MAX_GROUP_BYTES + 1);
        assert!(Cursor::checked(Some(&long), None).is_ok());
        assert!(Cursor::checked(Some("x\ny"), None).is_ok());
        let too_long = "g".repeat(MAX_AFTER_BYTES + 1);
        for (after, count) in [
            (Some(too_long.as_str()), None),
            (None, Some("0")),
            (None, Some("-1")),
            (None, Some("x")),
            (None, Some("")),
            (None, Some("201")),
        ] {
            assert!(
                Cursor::checked(after, count).is_err(),
                "{after:?} {count:?}"
            );
        }
    }
}
