//! One attempt: find the handler, run it under `catch_unwind`, the timeout and the
//! cancellation signal, and classify the outcome.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use std::future::Future;

use futures::future::BoxFuture;
use futures::FutureExt;
use tracing::Instrument;

use super::blocking::{PollWatch, BLOCKING_REPORT_AFTER};
use super::tracker::{AttemptOutcome, AttemptTracker};
use crate::deps::Deps;
use crate::engine::{AttemptFailure, ProcessFn, RawAttempt};
use crate::job::{CancelSignal, Job, JobError};
use crate::options::{Backoff, BackoffContext, BackoffFn};
use crate::registry::QueuePlan;

/// Everything an attempt of one queue needs, shared by its concurrent attempts.
pub(crate) struct Dispatcher {
    pub(crate) plan: QueuePlan,
    /// The worker's signs of life, for the liveness probe.
    pub(crate) pulse: Arc<crate::health::WorkerPulse>,
    pub(crate) deps: Arc<Deps>,
    pub(crate) tracker: Arc<AttemptTracker>,
    /// The app's custom backoffs: the engine asks them whether a job retries, so the
    /// worker asks them too, to know whether a failure is the last.
    pub(crate) backoff: Option<BackoffFn>,
    /// The attempt span's OpenTelemetry name, made once.
    pub(crate) span_name: String,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: Option<crate::metrics::QueueMetrics>,
}

impl Dispatcher {
    pub(crate) fn into_process_fn(self) -> ProcessFn {
        super::panic_site::install();
        let shared = Arc::new(self);
        Arc::new(move |raw: RawAttempt| -> BoxFuture<'static, _> {
            let shared = shared.clone();
            Box::pin(async move { shared.run(raw).await })
        })
    }

    async fn run(&self, raw: RawAttempt) -> Result<serde_json::Value, AttemptFailure> {
        self.pulse.took();
        // Ends the attempt on the pulse however `run` ends (a dropped future included).
        let _running = PulseEnd(&self.pulse);
        let RawAttempt {
            job,
            explain_null,
            lock_lost,
        } = raw;
        let meta = job.meta().clone();
        let (id, name, attempt, max_attempts) = (
            meta.id.as_str(),
            meta.name.as_str(),
            job.attempt(),
            job.max_attempts(),
        );
        let (span, trace) = crate::trace::consumer_span(
            &self.span_name,
            &self.plan.queue,
            id,
            name,
            attempt,
            job.trace_context(),
        );
        if job.recovered_from_stall() {
            // The engine's stalled checker does not report what it recovers (it misreads
            // the script's reply), so the worker that runs the job again says so.
            span.in_scope(|| {
                tracing::warn!("job recovered after a stall: an earlier run never finished")
            });
            self.tracker.stalled(id);
        }
        let tracked = self.tracker.started(&meta);
        self.tracker.data(&tracked, &job.data);
        #[cfg(feature = "metrics")]
        let measured = self.metrics.as_ref().map(|metrics| {
            let label = self.plan.metric_name(name);
            metrics.started(label, job.waited(), job.recovered_from_stall());
            (metrics, label, std::time::Instant::now())
        });
        // Kept for deciding, on failure, whether the engine will retry.
        let custom_backoff = match job.options().get_backoff() {
            Some(Backoff::Custom(strategy)) => Some((strategy.clone(), job.data.clone())),
            _ => None,
        };
        let (outcome, longest_poll) = match self.unreadable_data(&job, explain_null).await {
            Some(problem) => (Err(unrecoverable(problem)), Duration::ZERO),
            None => self.attempt(job, trace).instrument(span.clone()).await,
        };

        // The reports below name the span as their parent rather than entering it: an
        // enter costs each attempt a context switch in every tracing layer.
        if longest_poll >= BLOCKING_REPORT_AFTER {
            tracing::warn!(
                parent: &span,
                blocked_ms = longest_poll.as_millis() as u64,
                "the handler held its thread without yielding; other tasks on it waited. \
                 Move blocking or CPU-heavy work into tokio::task::spawn_blocking"
            );
            self.tracker.blocked(id, name, longest_poll);
        }
        let mut outcome = outcome;
        if let Err(failure) = &mut outcome {
            failure.is_final =
                self.is_final(failure, attempt, max_attempts, custom_backoff.as_ref());
        }
        // Another run holds the job now: this run's outcome counts for nothing (the
        // engine leaves the job alone). A lost lock is never a failure of the job.
        let lost = lock_lost.is_set();
        #[cfg(feature = "metrics")]
        if let Some((metrics, label, started)) = measured {
            use crate::metrics::AttemptEnd;
            let end = match &outcome {
                _ if lost => AttemptEnd::LockLost,
                Ok(_) => AttemptEnd::Completed,
                Err(f) if f.is_final => AttemptEnd::Failed {
                    timed_out: f.timed_out,
                },
                Err(f) => AttemptEnd::Retried {
                    timed_out: f.timed_out,
                },
            };
            metrics.ended(label, started.elapsed(), end);
        }
        match &outcome {
            _ if lost => {
                self.tracker.ended(&tracked, AttemptOutcome::LockLost);
                tracing::info!(parent: &span, "the job's lock was lost: another run holds the job; this run's outcome is dropped");
            }
            Ok(_) => {
                self.tracker.ended(&tracked, AttemptOutcome::Completed);
                tracing::debug!(parent: &span, "job completed");
            }
            Err(failure) => {
                span.record("otel.status_code", "error");
                span.record("otel.status_description", failure.reason.as_str());
                let is_final = failure.is_final;
                self.tracker.ended(
                    &tracked,
                    AttemptOutcome::Failed {
                        reason: &failure.reason,
                        is_final,
                    },
                );
                let timed_out = failure.timed_out;
                if is_final {
                    tracing::warn!(parent: &span, reason = %failure.reason, timed_out, "job failed for good");
                } else {
                    tracing::info!(parent: &span, reason = %failure.reason, timed_out, "attempt failed, will retry");
                }
            }
        }
        outcome
    }

    /// Whether the engine will fail the job for good after this failure, decided as the
    /// engine decides: an unrecoverable failure, no attempt left, or a custom backoff
    /// (the same function the engine calls) that says stop.
    fn is_final(
        &self,
        failure: &AttemptFailure,
        attempt: u32,
        max_attempts: u32,
        custom_backoff: Option<&(String, serde_json::Value)>,
    ) -> bool {
        if !failure.retryable || attempt >= max_attempts {
            return true;
        }
        match (custom_backoff, &self.backoff) {
            (Some((strategy, data)), Some(backoff)) => {
                let ctx = BackoffContext {
                    attempt,
                    reason: &failure.reason,
                    data,
                };
                backoff(strategy, &ctx).is_none()
            }
            // A custom backoff the app does not know: the engine does not retry.
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// Why the job's `null` data is unusable (missing, or not JSON), asked only when its
    /// handler's payload cannot be `null`.
    async fn unreadable_data(
        &self,
        job: &Job<serde_json::Value>,
        explain_null: Option<BoxFuture<'static, Option<String>>>,
    ) -> Option<String> {
        let explain = explain_null?;
        let planned = self.plan.handler_for(job.name())?;
        if planned.handler.accepts_null {
            return None;
        }
        explain.await
    }

    /// Finds the job's handler and runs it under supervision, in `trace` (so that a
    /// fan-out stays one trace); also returns the longest single poll of the handler.
    async fn attempt(
        &self,
        job: Job<serde_json::Value>,
        trace: Option<crate::trace::TraceContext>,
    ) -> (Result<serde_json::Value, AttemptFailure>, Duration) {
        let Some(planned) = self.plan.handler_for(job.name()) else {
            let failure = AttemptFailure {
                reason: format!(
                    "no handler for job name `{}` on queue `{}`; this worker handles: {}",
                    job.name(),
                    self.plan.queue,
                    self.plan.known_names()
                ),
                // A worker that knows the name may be deploying: its retries reach it.
                retryable: !self.plan.fail_unknown_names,
                is_final: false,
                timed_out: false,
                stack: None,
            };
            return (Err(failure), Duration::ZERO);
        };
        let supervision = Supervision {
            timeout: job.options().get_timeout().or(planned.timeout),
            cancel: job.cancel_signal(),
            cancel_grace: self.plan.cancel_grace,
        };
        // `run` is lazy: the payload's deserialization and the call that builds the
        // handler's future happen in the first poll, inside `catch_unwind`.
        let handler = planned.handler.run(job, &self.deps);
        let handler: BoxFuture<'_, _> = match trace {
            Some(trace) => Box::pin(crate::trace::scope(trace, handler)),
            None => Box::pin(handler),
        };
        let (watched, longest_poll) = PollWatch::new(handler);
        let outcome = supervision.run(watched).await;
        (outcome, longest_poll.get())
    }
}

/// What an attempt is watched for besides its own outcome.
struct Supervision {
    timeout: Option<Duration>,
    cancel: CancelSignal,
    cancel_grace: Duration,
}

impl Supervision {
    /// Runs `handler` until it ends, panics, runs out of time, or ignores a cancellation
    /// for longer than the grace; the future is dropped in the last two cases.
    async fn run(
        self,
        handler: impl Future<Output = Result<serde_json::Value, JobError>>,
    ) -> Result<serde_json::Value, AttemptFailure> {
        let Supervision {
            timeout,
            cancel,
            cancel_grace,
        } = self;
        // The timers are boxed, made only when needed: inline, they made every
        // attempt's future (boxed per job) bigger, set or not.
        let deadline = async {
            match timeout {
                Some(limit) => Box::pin(tokio::time::sleep(limit)).await,
                None => std::future::pending().await,
            }
        };
        let cancelled_and_ignored = async {
            cancel.cancelled().await;
            Box::pin(tokio::time::sleep(cancel_grace)).await;
        };
        tokio::select! {
            // The handler first: when it finishes in the same wake-up as the deadline,
            // its own result wins. Its effects have happened; reporting a timeout would
            // run them again.
            biased;
            result = AssertUnwindSafe(handler).catch_unwind() => match result {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(e)) if cancel.is_cancelled() => Err(unrecoverable(format!("cancelled: {}", e.message()))),
                Ok(Err(e)) => Err(AttemptFailure { reason: e.message().to_owned(), retryable: e.is_retryable(), is_final: false, timed_out: false, stack: e.chain_text() }),
                Err(panic) => Err(panicked(panic_message(panic.as_ref()), super::panic_site::take())),
            },
            () = deadline => Err(AttemptFailure {
                is_final: false,
                timed_out: true,
                reason: format!("timed out after {}", human(timeout.unwrap_or_default())),
                retryable: true,
                stack: None,
            }),
            () = cancelled_and_ignored => Err(unrecoverable(format!(
                "cancelled: the handler did not stop within {} of the request",
                human(cancel_grace)
            ))),
        }
    }
}

fn unrecoverable(reason: String) -> AttemptFailure {
    AttemptFailure {
        reason,
        retryable: false,
        is_final: true,
        timed_out: false,
        stack: None,
    }
}

/// A panic, retryable (the next attempt may not hit it); its record says where it
/// happened when the panic hook saw it (`panic_site`).
fn panicked(message: &str, at: Option<String>) -> AttemptFailure {
    AttemptFailure {
        reason: format!("handler panicked: {message}"),
        retryable: true,
        is_final: false,
        timed_out: false,
        stack: at.map(|at| format!("handler panicked at {at}:\n{message}")),
    }
}

pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> &str {
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

/// Marks an attempt ended on its worker's pulse when dropped.
struct PulseEnd<'a>(&'a crate::health::WorkerPulse);

impl Drop for PulseEnd<'_> {
    fn drop(&mut self) {
        self.0.ended();
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
