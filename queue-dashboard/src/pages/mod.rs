//! The pages, one file each. A page reads what it shows in a bounded number of Redis
//! commands, whatever the queue's size, and renders it with maud.
//!
//! A new page is a file here with its handler, a route in `Dashboard::router`, and a
//! link from the queue page's `nav.sub` (as the queue's groups have).

pub(super) mod attempts;
pub(super) mod flow;
pub(super) mod groups;
pub(super) mod job;
pub(super) mod listing;
pub(super) mod overview;
pub(super) mod queue;
pub(super) mod schedulers;
pub(super) mod workers;

use maud::{html, Markup};
use queue_core::JobState;

/// The states a queue page lists, in the order of a job's life.
pub(super) const LISTED: [JobState; 7] = [
    JobState::Waiting,
    JobState::Prioritized,
    JobState::Delayed,
    JobState::Active,
    JobState::WaitingChildren,
    JobState::Completed,
    JobState::Failed,
];

/// Shown by the page's script while the live stream says Redis is unavailable.
fn unavailable_notice() -> Markup {
    html! {
        p.notice data-unavailable hidden {
            "Redis is unavailable: this page is not live until it is back."
        }
    }
}

/// The heading of a queue's sub-page: the queue, linked, and what the page lists.
fn sub_page_heading(queue_page: &str, queue: &str, what: &str) -> Markup {
    html! {
        h1 { a href=(queue_page) { (super::view::format::Clip(queue, 80)) } " · " (what) }
    }
}
