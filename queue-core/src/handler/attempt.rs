//! One attempt of a handler outside a worker (an inline app's, the testing kit's): under
//! `catch_unwind` and its timeout, as a worker would run it, without Redis.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;

use crate::job::JobError;

/// One attempt: its value, or its reason and whether a retry may follow.
pub(crate) async fn attempt(
    handler: futures::future::BoxFuture<'static, Result<serde_json::Value, JobError>>,
    timeout: Option<Duration>,
) -> Result<serde_json::Value, (String, bool)> {
    let guarded = AssertUnwindSafe(handler).catch_unwind();
    let outcome = match timeout {
        Some(after) => match tokio::time::timeout(after, guarded).await {
            Ok(outcome) => outcome,
            Err(_) => return Err((format!("timed out after {after:?}"), true)),
        },
        None => guarded.await,
    };
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err((e.message().to_owned(), e.is_retryable())),
        Err(panic) => Err((
            format!(
                "handler panicked: {}",
                super::panic::message(panic.as_ref())
            ),
            true,
        )),
    }
}
