//! Tying a job to the request that enqueued it: a trace id carried from the producer's
//! task to the job's span in whichever worker runs it.
//!
//! ```no_run
//! # async fn demo(email: queue_core::Queue<String>) -> queue_core::Result<()> {
//! use queue_core::{trace, JobOptions};
//!
//! // queue-axum's layer does this for every request (from `traceparent`,
//! // `x-request-id`, or a new id):
//! trace::scope("req-7f3a".to_owned(), async {
//!     email.add("welcome", "ada@example.com".into(), JobOptions::new()).await
//! })
//! .await?;
//! // The worker's `job` span then has `trace_id = "req-7f3a"`, and `Job::trace_id()`
//! // returns it.
//! # Ok(()) }
//! ```

use std::future::Future;

tokio::task_local! {
    static TRACE_ID: String;
}

/// Runs `future` with `trace_id` as the current trace id: jobs it adds carry it.
pub async fn scope<F: Future>(trace_id: String, future: F) -> F::Output {
    TRACE_ID.scope(trace_id, future).await
}

/// The current task's trace id, if it runs inside [`scope`] with a non-empty id. A
/// handler runs inside its job's scope, so the jobs it adds inherit the id.
pub fn current() -> Option<String> {
    TRACE_ID
        .try_with(Clone::clone)
        .ok()
        .filter(|id| !id.is_empty())
}

/// Keeps a trace id safe to store and log: printable ASCII, at most 128 bytes.
pub(crate) fn sanitize(id: &str) -> Option<String> {
    let clean: String = id
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(128)
        .collect();
    (!clean.is_empty()).then_some(clean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_scope_sets_the_current_id() {
        assert_eq!(current(), None);
        let inside = scope("abc".into(), async { current() }).await;
        assert_eq!(inside.as_deref(), Some("abc"));
        assert_eq!(sanitize(" a\nb "), Some("ab".into()));
        assert_eq!(sanitize("\n"), None);
    }
}
