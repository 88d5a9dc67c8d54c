//! The hand-over from a 202 to the wait around it: an [`Accepted`](crate::Accepted)
//! leaves its job in a task-local slot that only a request that asked to wait
//! (`Prefer: wait`) has, and [`PreferWaitLayer`](crate::PreferWaitLayer) reads it.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::task::futures::TaskLocalFuture;

/// Which job a 202 answered for: what [`PreferWaitLayer`](crate::PreferWaitLayer)
/// waits for when the request asked to.
#[derive(Debug, Clone)]
pub(crate) struct AcceptedJob {
    pub(crate) queue: String,
    pub(crate) id: String,
    /// The fields added with [`Accepted::with`](crate::Accepted::with): a waited answer keeps them.
    pub(crate) extra: serde_json::Map<String, serde_json::Value>,
}

/// Where an [`Accepted`](crate::Accepted) leaves its job for the wait around it.
pub(crate) type AcceptedSlot = Arc<Mutex<Option<AcceptedJob>>>;

tokio::task_local! {
    /// The slot of the request being waited for, while its handler runs. Only a request
    /// that asked to wait has one: every other 202 hands nothing over and pays nothing
    /// for it (a response extension is two allocations and a map, each request).
    static WAITED_FOR: AcceptedSlot;
}

impl AcceptedJob {
    /// Runs `future` (a request's handler) so that an [`Accepted`](crate::Accepted) it answers with
    /// leaves its job in the returned slot.
    pub(crate) fn handed_over_by<F: Future>(
        future: F,
    ) -> (AcceptedSlot, TaskLocalFuture<AcceptedSlot, F>) {
        let slot = AcceptedSlot::default();
        (slot.clone(), WAITED_FOR.scope(slot, future))
    }

    /// The slot of the wait this runs in, if any: for a layer that goes on on a task
    /// of its own (a task-local stays with its task).
    pub(crate) fn current_slot() -> Option<AcceptedSlot> {
        WAITED_FOR.try_with(Clone::clone).ok()
    }

    /// Runs `future` with `slot` (from [`Self::current_slot`]) as its wait's slot.
    pub(crate) async fn in_slot<F: Future>(slot: Option<AcceptedSlot>, future: F) -> F::Output {
        match slot {
            Some(slot) => WAITED_FOR.scope(slot, future).await,
            None => future.await,
        }
    }

    /// Leaves `job` in the slot of the wait this runs in, if any.
    pub(crate) fn hand_over(job: impl FnOnce() -> AcceptedJob) {
        let _ = WAITED_FOR.try_with(|slot| {
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(job());
        });
    }
}
