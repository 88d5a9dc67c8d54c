//! A job's flow as nested lists, the job itself in bold; a failed node with its reason
//! (a sealed one as sealed, with its key's id, unless it was opened for the reader).

use maud::{html, Markup};
use queue_core::JobState;

use super::format::Clip;
use super::{sealed, widgets};
use crate::base::Base;
use crate::limits::LISTED_CHARS;
use crate::load::flow::{FlowTree, MAX_NODES};

/// The tree, the job `(queue, id)` in bold.
pub(crate) fn render(tree: &FlowTree, base: &Base, queue: &str, id: &str) -> Markup {
    html! {
        h2 { "Flow" }
        @if tree.cut_above { p.muted { "Higher ancestors are not shown." } }
        ul.tree { (node(tree, 0, base, (queue, id))) }
        @if tree.truncated() {
            p.muted { "The first " (MAX_NODES) " jobs of the flow are shown." }
        }
    }
}

fn node(tree: &FlowTree, index: usize, base: &Base, current: (&str, &str)) -> Markup {
    let node = &tree.nodes[index];
    let here = (node.queue.as_str(), node.id.as_str()) == current;
    html! {
        li {
            @let link = html! {
                a href=(base.job(&node.queue, &node.id)) { (Clip(&node.id, LISTED_CHARS)) }
                " " span.muted { "in " (Clip(&node.queue, LISTED_CHARS)) }
            };
            @if here { strong { (link) } } @else { (link) }
            " "
            @match node.state {
                Some(state) => (widgets::state_chip(state)),
                None => span.chip.muted { "gone" },
            }
            @if let (Some(reason), Some(JobState::Failed)) = (&node.reason, node.state) {
                " " span.bad { (sealed::inline(reason, LISTED_CHARS)) }
            }
            @if !node.children.is_empty() || node.more > 0 {
                ul {
                    @for &child in &node.children { (self::node(tree, child, base, current)) }
                    @if node.more > 0 { li.muted { "… " (node.more) " more" } }
                }
            }
        }
    }
}
