//! Pieces several pages use: action buttons, the link to a confirmation, a state's
//! chip, the per-minute sparkline, a sub-page's heading, the unavailable notice.

use std::fmt::Write as _;

use maud::{html, Markup, PreEscaped};
use queue_core::JobState;

use super::format::Clip;

/// A POST button: one form per action, so each works without JavaScript.
pub(crate) fn post_button(action: &str, label: &str, danger: bool) -> Markup {
    post_button_with(action, label, danger, &[])
}

/// A POST button that sends `fields` (hidden) with its form: what the action acts on
/// when that is no part of its address.
pub(crate) fn post_button_with(
    action: &str,
    label: &str,
    danger: bool,
    fields: &[(&str, String)],
) -> Markup {
    html! {
        form.inline method="post" action=(action) {
            @for (name, value) in fields { input type="hidden" name=(name) value=(value); }
            @if danger { button.danger { (label) } } @else { button { (label) } }
        }
    }
}

/// A destructive action's button: a link to the page that says what it will do and
/// how many jobs it touches, where the operator confirms.
pub(crate) fn confirm_link(href: &str, label: &str) -> Markup {
    html! { a.button.danger href=(href) { (label) "…" } }
}

/// A job state as a chip, coloured by how it went.
pub(crate) fn state_chip(state: JobState) -> Markup {
    let class = match state {
        JobState::Completed => "chip good",
        JobState::Failed => "chip bad",
        _ => "chip",
    };
    html! { span class=(class) data-state { (state.as_str()) } }
}

/// A tiny bar chart of per-minute counts (oldest left), as inline SVG: no script, no
/// image request. `points` come newest first, as BullMQ stores them. Raw markup built
/// from numbers only.
pub(crate) fn sparkline(points: &[u64], class: &'static str) -> Markup {
    const WIDTH: usize = 120;
    const HEIGHT: u64 = 24;
    let max = points.iter().copied().max().unwrap_or(0).max(1);
    let bar = (WIDTH / points.len().max(1)).max(1);
    let mut bars = String::new();
    for (i, n) in points.iter().rev().enumerate() {
        let h = (n * HEIGHT).div_ceil(max);
        let _ = write!(
            bars,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{h}\"/>",
            i * bar,
            HEIGHT - h,
            bar.saturating_sub(1).max(1)
        );
    }
    let label = format!(
        "{} in the last {} minutes",
        points.iter().sum::<u64>(),
        points.len()
    );
    html! {
        svg class={ "spark " (class) } width=(WIDTH) height=(HEIGHT) role="img" aria-label=(label) {
            (PreEscaped(bars))
        }
    }
}

/// Shown by the page's script while the live stream says Redis is unavailable.
pub(crate) fn unavailable_notice() -> Markup {
    html! {
        p.notice data-unavailable hidden {
            "Redis is unavailable: this page is not live until it is back."
        }
    }
}

/// The heading of a queue's sub-page: the queue, linked, and what the page lists.
pub(crate) fn sub_page_heading(queue_page: &str, queue: &str, what: &str) -> Markup {
    html! {
        h1 { a href=(queue_page) { (Clip(queue, 80)) } " · " (what) }
    }
}
