//! One attempt: find the handler, run it under `catch_unwind`, the timeout and the
//! cancellation signal, and classify the outcome.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use tracing::Instrument;

use super::tracker::AttemptTracker;
use crate::deps::Deps;
use crate::engine::AttemptFailure;
use crate::engine::{ProcessFn, RawAttempt};
use crate::registry::QueuePlan;

/// Everything an attempt of one queue needs, shared by its concurrent attempts.
pub(crate) struct Dispatcher {
    pub(crate) plan: QueuePlan,
    pub(crate) deps: Arc<Deps>,
    pub(crate) tracker: Arc<AttemptTracker>,
}

impl Dispatcher {
    pub(crate) fn into_process_fn(self) -> ProcessFn {
        let shared = Arc::new(self);
        Arc::new(move |raw: RawAttempt| -> BoxFuture<'static, _> {
            let shared = shared.clone();
            Box::pin(async move { shared.run(raw).await })
        })
    }

    async fn run(&self, raw: RawAttempt) -> Result<serde_json::Value, AttemptFailure> {
        let job = raw.job;
        let (id, name, attempt, max_attempts) = (
            job.id().to_owned(),
            job.name().to_owned(),
            job.attempt(),
            job.max_attempts(),
        );
        let trace_id = job.trace_id().unwrap_or_default().to_owned();
        let trace_id = &trace_id;
        let span = tracing::info_span!("job", queue = %self.plan.queue, job_id = %id, name = %name, attempt, trace_id = %trace_id);
        self.tracker.started(&id, &name, attempt, max_attempts);

        let outcome = async {
            let Some(planned) = self.plan.handler_for(&name) else {
                return Err(unrecoverable(format!(
                    "no handler for job name `{name}` on queue `{}`; this worker handles: {}",
                    self.plan.queue,
                    self.plan.known_names()
                )));
            };
            let cancel = job.cancel_signal();
            let job_timeout = job.options().get_timeout();
            // Jobs the handler adds inherit its trace id, so a fan-out stays one trace.
            let handler = planned.handler.run(job, &self.deps);
            let handler = AssertUnwindSafe(crate::trace::scope(trace_id.clone(), handler)).catch_unwind();
            let limit = job_timeout.or(planned.timeout);
            let deadline = async move {
                match limit {
                    Some(limit) => {
                        tokio::time::sleep(limit).await;
                        limit
                    }
                    None => std::future::pending().await,
                }
            };
            let grace = self.plan.cancel_grace;
            let cancelled_and_ignored = async {
                cancel.cancelled().await;
                tokio::time::sleep(grace).await;
            };
            tokio::select! {
                result = handler => match result {
                    Ok(Ok(value)) => Ok(value),
                    Ok(Err(e)) if cancel.is_cancelled() => Err(unrecoverable(format!("cancelled: {}", e.message()))),
                    Ok(Err(e)) => Err(AttemptFailure { reason: e.message().to_owned(), retryable: e.is_retryable() }),
                    Err(panic) => Err(AttemptFailure {
                        reason: format!("handler panicked: {}", panic_message(panic.as_ref())),
                        retryable: true,
                    }),
                },
                limit = deadline => Err(AttemptFailure { reason: format!("timed out after {}", human(limit)), retryable: true }),
                () = cancelled_and_ignored => Err(unrecoverable(format!(
                    "cancelled: the handler did not stop within {} of the request", human(grace)
                ))),
            }
        }
        .instrument(span.clone())
        .await;

        let _entered = span.enter();
        match &outcome {
            Ok(_) => tracing::info!("job completed"),
            Err(f) => {
                let is_final = !f.retryable || attempt >= max_attempts;
                self.tracker.failed_finally(&id, is_final);
                if is_final {
                    tracing::warn!(reason = %f.reason, "job failed for good");
                } else {
                    tracing::info!(reason = %f.reason, "attempt failed, will retry");
                }
            }
        }
        outcome
    }
}

fn unrecoverable(reason: String) -> AttemptFailure {
    AttemptFailure {
        reason,
        retryable: false,
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-string panic payload")
}

fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_messages_are_read_from_both_payload_kinds() {
        let s: Box<dyn Any + Send> = Box::new("boom");
        let owned: Box<dyn Any + Send> = Box::new(String::from("bang"));
        let other: Box<dyn Any + Send> = Box::new(42);
        assert_eq!(panic_message(s.as_ref()), "boom");
        assert_eq!(panic_message(owned.as_ref()), "bang");
        assert_eq!(panic_message(other.as_ref()), "a non-string panic payload");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human(Duration::from_secs(30)), "30s");
        assert_eq!(human(Duration::from_millis(250)), "250ms");
    }
}
