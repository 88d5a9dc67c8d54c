//! What a request runs in that stays with its task: its trace scope, the slot a
//! `Prefer: wait` around it waits on, and its span. A layer that runs the rest of the
//! request on a task of its own (`IdempotencyLayer`) takes them along, or the jobs of
//! its routes would start untraced and a wait outside it would never see their job.

use std::future::Future;

use queue_core::trace::{self, TraceContext};
use tracing::Instrument;

use crate::handover::{AcceptedJob, AcceptedSlot};

/// The request's task-locals and span, taken where the request runs.
pub(crate) struct Carried {
    trace: Option<TraceContext>,
    waited_for: Option<AcceptedSlot>,
    span: tracing::Span,
}

impl Carried {
    /// What the current task runs in.
    pub(crate) fn here() -> Self {
        Carried {
            trace: trace::current(),
            waited_for: AcceptedJob::current_slot(),
            span: tracing::Span::current(),
        }
    }

    /// Runs `future` in what was taken, wherever it is polled.
    pub(crate) async fn around<F: Future>(self, future: F) -> F::Output {
        let future = AcceptedJob::in_slot(self.waited_for, future).instrument(self.span);
        match self.trace {
            Some(context) => trace::scope(context, future).await,
            None => future.await,
        }
    }
}
