//! The current trace context of a task: [`scope`] sets it around a future (a request,
//! a job's attempt), and every job added inside carries a child of it. A task-local,
//! so that the context follows the work across `.await`s without being passed by hand.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::task::futures::TaskLocalFuture;

use super::context::TraceContext;

tokio::task_local! {
    static CURRENT: TraceContext;
}

/// Runs `future` with `context` as the current trace context: jobs it adds carry a
/// child of it.
///
/// The returned future is a named type, so that a layer can hold it without boxing
/// it (every traced request goes through here).
pub fn scope<F: Future>(context: TraceContext, future: F) -> Scoped<F> {
    Scoped {
        inner: CURRENT.scope(context, future),
    }
}

pin_project_lite::pin_project! {
    /// A future that runs in a trace context: what [`scope`] returns.
    #[must_use = "futures do nothing unless polled"]
    pub struct Scoped<F> {
        #[pin]
        inner: TaskLocalFuture<TraceContext, F>,
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().inner.poll(cx)
    }
}

impl<F> fmt::Debug for Scoped<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scoped").finish_non_exhaustive()
    }
}

/// The current task's trace context, if it runs inside [`scope`]. A handler runs
/// inside its job's context, so the jobs it adds continue the trace.
pub fn current() -> Option<TraceContext> {
    CURRENT.try_with(Clone::clone).ok()
}

/// A child of the current trace context, if any.
pub(super) fn current_child() -> Option<TraceContext> {
    CURRENT.try_with(TraceContext::child).ok()
}

/// Calls `f` with the current trace context, borrowed, if there is one: every add
/// looks at it, and most never need a copy.
pub(super) fn with_current<R>(f: impl FnOnce(&TraceContext) -> R) -> Option<R> {
    CURRENT.try_with(f).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_scope_sets_the_current_context() {
        assert_eq!(current(), None);
        let root = TraceContext::new_root();
        let inside = scope(root.clone(), async { current() }).await;
        assert_eq!(inside, Some(root));
        assert_eq!(current(), None);
    }
}
