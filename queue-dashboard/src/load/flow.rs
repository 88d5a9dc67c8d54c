//! A job's whole flow, read: up to its root, then every level down, each node with its
//! state; bounded per parent and in all, so a flow of a million children costs what a
//! small one does. A failed node's reason, when sealed, is shown as the job's page shows
//! one ([`super::notes`]): opened only for a reader who may reveal it, each opening
//! audited.

use std::collections::HashMap;

use futures::future::try_join_all;
use queue_axum::access::Access;
use queue_core::job::FailedChild;
use queue_core::queue::Children;
use queue_core::{JobInfo, JobState, QueueApp};
use serde_json::Value;

use super::notes::{show_text, Note};
use super::payload::Shown;

/// Ancestors followed up from the job.
const MAX_UP: usize = 8;
/// Levels read down from the root.
const MAX_DEPTH: usize = 8;
/// Children read of each parent.
const PER_PARENT: usize = 25;
/// Nodes read in all.
pub(crate) const MAX_NODES: usize = 150;

/// One job of the tree.
pub(crate) struct FlowNode {
    pub(crate) queue: String,
    pub(crate) id: String,
    /// `None`: the job is gone.
    pub(crate) state: Option<JobState>,
    /// A failed job's reason (`None` for another state).
    pub(crate) reason: Option<Shown<String>>,
    /// Indexes into [`FlowTree::nodes`].
    pub(crate) children: Vec<usize>,
    /// Children not read (past `PER_PARENT`, `MAX_NODES` or `MAX_DEPTH`).
    pub(crate) more: u64,
}

/// The tree around a job, read from its root (the first node) down.
pub(crate) struct FlowTree {
    pub(crate) nodes: Vec<FlowNode>,
    /// Ancestors above the root that were not read (past `MAX_UP`).
    pub(crate) cut_above: bool,
    /// The node of the job whose page this is, when it was read: its reason is the
    /// page's ([`FlowTree::set_current_reason`]).
    current: Option<usize>,
}

impl FlowTree {
    /// Reads the flow of job `info` (in `state`) of `queue` for `access`: nothing when
    /// it has no parent and no children (two commands). The job's own reason is left to
    /// its page ([`FlowTree::set_current_reason`]).
    pub(crate) async fn read(
        app: &QueueApp,
        access: &Access,
        queue: &str,
        info: &JobInfo,
        state: JobState,
    ) -> Result<Option<FlowTree>, queue_core::Error> {
        // Up to the root.
        let (mut root_queue, mut root_id) = (queue.to_owned(), info.id.clone());
        let mut root_state = Some(state);
        // The root, when it is an ancestor: what its reason is read from.
        let mut root_job: Option<JobInfo> = None;
        let mut parent = info.parent.clone();
        let mut cut_above = false;
        for step in 0..=MAX_UP {
            let Some(up) = parent.take() else { break };
            if step == MAX_UP {
                cut_above = true;
                break;
            }
            let handle = app.queue::<serde_json::Value>(up.queue())?;
            let Some(job) = handle.get_job(&up.id).await? else {
                break;
            };
            let job_state = job.state;
            root_queue = up.queue().to_owned();
            root_id = up.id.clone();
            root_state = job_state;
            parent = job.parent.clone();
            root_job = Some(job);
        }
        // No ancestor read: the root is the job itself.
        let current = root_job.is_none().then_some(0);
        let root_reason = match root_job {
            Some(job) if root_state == Some(JobState::Failed) => {
                let handle = app.queue::<Value>(&root_queue)?;
                ancestor_reason(&handle, access, job)
            }
            _ => None,
        };
        let mut tree = FlowTree {
            current,
            nodes: vec![FlowNode {
                queue: root_queue,
                id: root_id,
                state: root_state,
                reason: root_reason,
                children: Vec::new(),
                more: 0,
            }],
            cut_above,
        };
        tree.read_down(app, access, (queue, &info.id)).await?;
        if tree.nodes.len() == 1 && tree.nodes[0].more == 0 && info.parent.is_none() {
            return Ok(None);
        }
        Ok(Some(tree))
    }

    /// Reads the levels below the root, a level at a time (one round of reads each),
    /// for `access`; `current` is the job whose page this is.
    async fn read_down(
        &mut self,
        app: &QueueApp,
        access: &Access,
        current: (&str, &str),
    ) -> Result<(), queue_core::Error> {
        let mut level = vec![0];
        for _ in 0..MAX_DEPTH {
            let reads = level.iter().map(|&i| {
                let node = &self.nodes[i];
                let (queue, id) = (node.queue.clone(), node.id.clone());
                async move {
                    let handle = app.queue::<serde_json::Value>(&queue)?;
                    handle.get_children(&id, PER_PARENT).await
                }
            });
            let all = try_join_all(reads).await?;
            let mut next = Vec::new();
            let mut pending: HashMap<String, Vec<usize>> = HashMap::new();
            for (&parent, children) in level.iter().zip(all) {
                let total =
                    children.pending_total + children.processed_total + children.failed_total;
                // What opens a failed child's reason: a parent's children, opened.
                let handle = app.queue::<Value>(&self.nodes[parent].queue)?;
                let listed = children
                    .pending
                    .iter()
                    .map(|c| (c.queue.clone(), c.id.clone(), None, None))
                    .chain(children.processed.iter().map(|c| {
                        (
                            c.queue.clone(),
                            c.id.clone(),
                            Some(JobState::Completed),
                            None,
                        )
                    }))
                    .chain(children.failed.iter().map(|f| {
                        (
                            f.child.queue.clone(),
                            f.child.id.clone(),
                            Some(JobState::Failed),
                            Some(f),
                        )
                    }));
                let mut taken = 0u64;
                for (queue, id, state, failed) in listed {
                    if self.nodes.len() >= MAX_NODES {
                        break;
                    }
                    let index = self.nodes.len();
                    if state.is_none() {
                        pending.entry(queue.clone()).or_default().push(index);
                    }
                    // Read only for a node shown, and the page's own job left to it.
                    let reason = if (queue.as_str(), id.as_str()) == current {
                        self.current = Some(index);
                        None
                    } else {
                        failed.map(|failed| child_reason(&handle, access, failed.clone()))
                    };
                    self.nodes.push(FlowNode {
                        queue,
                        id,
                        state,
                        reason,
                        children: Vec::new(),
                        more: 0,
                    });
                    self.nodes[parent].children.push(index);
                    next.push(index);
                    taken += 1;
                }
                self.nodes[parent].more = total.saturating_sub(taken);
            }
            // The states of the pending children: one round trip per queue.
            let states = pending.into_iter().map(|(queue, indexes)| {
                let ids: Vec<String> = indexes.iter().map(|&i| self.nodes[i].id.clone()).collect();
                async move {
                    let handle = app.queue::<serde_json::Value>(&queue)?;
                    Ok::<_, queue_core::Error>((indexes, handle.get_job_states(&ids).await?))
                }
            });
            for (indexes, states) in try_join_all(states).await? {
                for (i, state) in indexes.into_iter().zip(states) {
                    self.nodes[i].state = state;
                }
            }
            if next.is_empty() || self.nodes.len() >= MAX_NODES {
                break;
            }
            level = next;
        }
        Ok(())
    }

    /// Whether nodes were left unread for the bound on all of them.
    pub(crate) fn truncated(&self) -> bool {
        self.nodes.len() >= MAX_NODES
    }

    /// Whether the tree shows the reason of the job whose page this is: it was read,
    /// and failed.
    pub(crate) fn shows_current_reason(&self) -> bool {
        self.current
            .is_some_and(|i| self.nodes[i].state == Some(JobState::Failed))
    }

    /// The reason of the job whose page this is, as its page shows it (read, and opened
    /// if sealed, once for both).
    pub(crate) fn set_current_reason(&mut self, reason: Option<Shown<String>>) {
        if let (Some(i), true) = (self.current, self.shows_current_reason()) {
            self.nodes[i].reason = reason;
        }
    }
}

/// The reason of `job`, a failed ancestor of `handle`'s queue, as `access` may see it.
fn ancestor_reason(
    handle: &queue_core::Queue<Value>,
    access: &Access,
    mut job: JobInfo,
) -> Option<Shown<String>> {
    let reason = job.failed_reason.take()?;
    // Opened in the job holding its reason alone.
    job.data = Value::Null;
    job.return_value = None;
    job.stacktrace.clear();
    let (queue, id) = (handle.name(), job.id.clone());
    Some(show_text(
        access,
        queue,
        &id,
        Note::FailedReason,
        reason,
        |text| {
            job.failed_reason = Some(text);
            handle
                .open(job)
                .map(|job| job.failed_reason.unwrap_or_default())
        },
    ))
}

/// The reason of `failed`, a failed child as its parent (of `handle`'s queue) records
/// it, as `access` may see it.
fn child_reason(
    handle: &queue_core::Queue<Value>,
    access: &Access,
    mut failed: FailedChild,
) -> Shown<String> {
    let reason = std::mem::take(&mut failed.reason);
    let (queue, id) = (failed.child.queue.clone(), failed.child.id.clone());
    show_text(access, &queue, &id, Note::FailedReason, reason, |text| {
        // Opened among the parent's children, alone.
        failed.reason = text;
        let mut children = Children::default();
        children.failed.push(failed);
        handle
            .open_children(children)
            .map(|mut children| children.failed.pop().map(|f| f.reason).unwrap_or_default())
    })
}
