//! A job's whole flow, read: up to its root, then every level down, each node with its
//! state; bounded per parent and in all, so a flow of a million children costs what a
//! small one does.

use std::collections::HashMap;

use futures::future::try_join_all;
use queue_core::{JobInfo, JobState, QueueApp};

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
    pub(crate) reason: Option<String>,
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
}

impl FlowTree {
    /// Reads the flow of job `info` (in `state`) of `queue`: nothing when it has no
    /// parent and no children (two commands).
    pub(crate) async fn read(
        app: &QueueApp,
        queue: &str,
        info: &JobInfo,
        state: JobState,
    ) -> Result<Option<FlowTree>, queue_core::Error> {
        // Up to the root.
        let (mut root_queue, mut root_id) = (queue.to_owned(), info.id.clone());
        let (mut root_state, mut root_reason) = (Some(state), info.failed_reason.clone());
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
            root_reason = job.failed_reason.clone();
            parent = job.parent.clone();
        }
        let mut tree = FlowTree {
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
        tree.read_down(app).await?;
        if tree.nodes.len() == 1 && tree.nodes[0].more == 0 && info.parent.is_none() {
            return Ok(None);
        }
        Ok(Some(tree))
    }

    /// Reads the levels below the root, a level at a time (one round of reads each).
    async fn read_down(&mut self, app: &QueueApp) -> Result<(), queue_core::Error> {
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
                            Some(f.reason.clone()),
                        )
                    }));
                let mut taken = 0u64;
                for (queue, id, state, reason) in listed {
                    if self.nodes.len() >= MAX_NODES {
                        break;
                    }
                    let index = self.nodes.len();
                    if state.is_none() {
                        pending.entry(queue.clone()).or_default().push(index);
                    }
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
}
