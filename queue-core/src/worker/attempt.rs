//! One attempt: find the handler, run it under `catch_unwind`, the timeout and the
//! cancellation signal, and classify the outcome.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;

use super::blocking::{LongestPoll, BLOCKING_REPORT_AFTER};
use super::tracker::{AttemptOutcome, AttemptTracker, TrackedAttempt};
use crate::backend::{bounded_stack, AttemptFailure, ProcessFn, RawAttempt, STACK_TEXT_LIMIT};
use crate::deps::Deps;
use crate::encryption::{Field, Sealer};
use crate::handler::QueuePlan;
use crate::job::{CancelSignal, Job, JobError, JobMeta, LockLost};
use crate::options::{Backoff, BackoffContext, BackoffFn};

type Outcome = Result<serde_json::Value, AttemptFailure>;

/// Everything an attempt of one queue needs, shared by its concurrent attempts.
pub(crate) struct Dispatcher {
    pub(crate) plan: QueuePlan,
    /// The worker's signs of life, for the liveness probe.
    pub(crate) pulse: Arc<super::WorkerPulse>,
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
        crate::handler::panic::install();
        let shared = Arc::new(self);
        Arc::new(move |raw: RawAttempt| shared.begin(raw))
    }

    /// Sets the attempt up synchronously and returns the future that runs it: the
    /// engine boxes that future per job, and one that held the set-up's state across
    /// its awaits was too big for the allocator's per-thread cache.
    fn begin(self: &Arc<Self>, raw: RawAttempt) -> BoxFuture<'static, Outcome> {
        // A batch worker's pulse counts its batches (`WorkerSettings::on_batch`).
        if self.plan.options.batch.is_none() {
            self.pulse.took();
        }
        let RawAttempt {
            job,
            explain_null,
            lock_lost,
        } = raw;
        let meta = job.meta().clone();
        let (span, trace) = crate::trace::consumer_span(
            &self.span_name,
            &self.plan.queue,
            &meta.id,
            &meta.name,
            job.attempt(),
            job.trace_context(),
        );
        if job.recovered_from_stall() {
            // The engine's stalled checker does not report what it recovers (it misreads
            // the script's reply), so the worker that runs the job again says so.
            span.in_scope(|| {
                tracing::warn!("job recovered after a stall: an earlier run never finished")
            });
            self.tracker.stalled(&meta.id);
        }
        let tracked = self.tracker.started(&meta);
        self.tracker.data(&tracked, &job.data);
        #[cfg(feature = "metrics")]
        let metered = self.metrics.as_ref().map(|metrics| {
            metrics.started(
                self.plan.metric_name(&meta.name),
                job.waited(),
                job.recovered_from_stall(),
            );
            std::time::Instant::now()
        });
        // Kept for deciding, on failure, whether the engine will retry.
        let custom_backoff = match job.options().get_backoff() {
            Some(Backoff::Custom(strategy)) => Some(Box::new((strategy.clone(), job.data.clone()))),
            _ => None,
        };
        let ending = Ending {
            dispatcher: self.clone(),
            meta,
            span,
            tracked,
            custom_backoff,
            lock_lost,
            #[cfg(feature = "metrics")]
            metered,
        };
        // `null` data may stand for data that is missing or not JSON: asked only when
        // the job's handler cannot take `null` (rare, and its own, bigger future).
        let explain = explain_null.filter(|_| {
            self.plan
                .handler_for(job.name())
                .is_some_and(|planned| !planned.handler.accepts_null)
        });
        if let Some(explain) = explain {
            return Box::pin(async move {
                match explain.await {
                    Some(problem) => ending.finish(Err(unrecoverable(problem)), Duration::ZERO),
                    None => {
                        let dispatcher = ending.dispatcher.clone();
                        dispatcher.supervise(job, trace, ending).await
                    }
                }
            });
        }
        self.supervise(job, trace, ending)
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

    /// Finds the job's handler and returns the future that runs it under supervision,
    /// in `trace` (so that a fan-out stays one trace), and then ends the attempt.
    fn supervise(
        &self,
        job: Job<serde_json::Value>,
        trace: Option<crate::trace::TraceContext>,
        ending: Ending,
    ) -> BoxFuture<'static, Outcome> {
        if let Some(late) = super::missed_run::too_late(&job, crate::clock::now_ms()) {
            ending.span.in_scope(|| {
                tracing::info!(
                    late_by = %human(late),
                    "a scheduled run that started too late for its scheduler was skipped"
                )
            });
            return Box::pin(std::future::ready(
                ending.finish(Ok(serde_json::Value::Null), Duration::ZERO),
            ));
        }
        let Some(planned) = self.plan.handler_for(job.name()) else {
            let failure = AttemptFailure {
                reason: format!(
                    "no handler for job name `{}` on queue `{}`; this worker handles: {}",
                    job.name(),
                    self.plan.queue,
                    self.plan.known_names()
                ),
                // A worker that knows the name may be deploying: its retries reach it.
                retryable: !self.plan.options.fail_unknown_names,
                is_final: false,
                timed_out: false,
                stack: None,
            };
            return Box::pin(std::future::ready(
                ending.finish(Err(failure), Duration::ZERO),
            ));
        };
        let timeout = planned.attempt_timeout(job.options().get_timeout());
        let cancel = job.cancel_signal();
        // `run` is lazy: the payload's deserialization and the call that builds the
        // handler's future happen in the first poll, inside `catch_unwind`.
        let handler = self.plan.run(planned, job, &self.deps);
        let handler: BoxFuture<'static, _> = match trace {
            Some(trace) => Box::pin(crate::trace::scope(trace, handler)),
            None => Box::pin(handler),
        };
        Box::pin(Supervised {
            handler: Some(handler),
            longest_poll: LongestPoll::default(),
            timeout,
            deadline: None,
            cancel,
            cancel_grace: self.plan.options.cancel_grace,
            cancelled: None,
            grace: None,
            ending: Some(ending),
        })
    }
}

/// What an attempt's end needs, kept from its set-up. Ends the attempt on the worker's
/// pulse when dropped, however the attempt ends (a dropped future included).
struct Ending {
    dispatcher: Arc<Dispatcher>,
    meta: Arc<JobMeta>,
    span: tracing::Span,
    tracked: TrackedAttempt,
    /// The strategy and the data, boxed: rare, and kept out of the per-job future.
    custom_backoff: Option<Box<(String, serde_json::Value)>>,
    lock_lost: LockLost,
    /// When the attempt started, when metrics are kept.
    #[cfg(feature = "metrics")]
    metered: Option<std::time::Instant>,
}

impl Drop for Ending {
    fn drop(&mut self) {
        if self.dispatcher.plan.options.batch.is_none() {
            self.dispatcher.pulse.ended();
        }
    }
}

impl Ending {
    /// Settles the outcome (whether a failure is the last; a lost lock), and reports it:
    /// the tracker, the metrics, the logs. `longest_poll` is the handler's longest
    /// single poll.
    fn finish(&self, outcome: Outcome, longest_poll: Duration) -> Outcome {
        let dispatcher = &*self.dispatcher;
        let span = &self.span;
        let (id, name) = (self.meta.id.as_str(), self.meta.name.as_str());
        // The reports below name the span as their parent rather than entering it: an
        // enter costs each attempt a context switch in every tracing layer.
        if longest_poll >= BLOCKING_REPORT_AFTER {
            tracing::warn!(
                parent: span,
                blocked_ms = longest_poll.as_millis() as u64,
                "the handler held its thread without yielding; other tasks on it waited. \
                 Move blocking or CPU-heavy work into tokio::task::spawn_blocking"
            );
            dispatcher.tracker.blocked(id, name, longest_poll);
        }
        let mut outcome = outcome;
        // Sealed before the retry is decided: a custom backoff decides on the reason as
        // the engine stores it, as the engine's own call will. In-process listeners get
        // it as the handler gave it (`clear_reason`).
        let mut clear_reason = None;
        if let Err(failure) = &mut outcome {
            clear_reason = seal_failure(&dispatcher.plan.sealer, failure);
            failure.is_final = dispatcher.is_final(
                failure,
                self.meta.attempt(),
                self.meta.max_attempts(),
                self.custom_backoff.as_deref(),
            );
        }
        // Another run holds the job now: this run's outcome counts for nothing (the
        // engine leaves the job alone). A lost lock is never a failure of the job.
        let lost = self.lock_lost.is_set();
        #[cfg(feature = "metrics")]
        if let (Some(metrics), Some(started)) = (&dispatcher.metrics, self.metered) {
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
            metrics.ended(dispatcher.plan.metric_name(name), started.elapsed(), end);
        }
        let tracker = &dispatcher.tracker;
        match &outcome {
            _ if lost => {
                tracker.ended(&self.tracked, AttemptOutcome::LockLost);
                tracing::info!(parent: span, "the job's lock was lost: another run holds the job; this run's outcome is dropped");
            }
            Ok(_) => {
                tracker.ended(&self.tracked, AttemptOutcome::Completed);
                tracing::debug!(parent: span, "job completed");
            }
            Err(failure) => {
                tracker.ended(
                    &self.tracked,
                    AttemptOutcome::Failed {
                        reason: clear_reason.as_deref().unwrap_or(&failure.reason),
                        is_final: failure.is_final,
                    },
                );
            }
        }
        if let Err(failure) = &outcome {
            if !lost {
                span.record("otel.status_code", "error");
                span.record("otel.status_description", failure.reason.as_str());
                let timed_out = failure.timed_out;
                if failure.is_final {
                    tracing::warn!(parent: span, reason = %failure.reason, timed_out, "job failed for good");
                } else {
                    tracing::info!(parent: span, reason = %failure.reason, timed_out, "attempt failed, will retry");
                }
            }
        }
        outcome
    }
}

/// The per-job future: the handler's, polled in the attempt's span under
/// `catch_unwind`, timed poll by poll (`blocking`), and raced against the timeout and
/// an ignored cancellation; then the attempt's end. Written out rather than `async`
/// so that it stays small: its timers and the cancellation's wait are boxed, made only
/// when used.
struct Supervised {
    /// `None` once it ended or was given up (dropped then, before the attempt's end).
    handler: Option<BoxFuture<'static, Result<serde_json::Value, JobError>>>,
    longest_poll: LongestPoll,
    timeout: Option<Duration>,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    cancel: CancelSignal,
    cancel_grace: Duration,
    cancelled: Option<BoxFuture<'static, ()>>,
    /// Runs from the cancellation's request.
    grace: Option<Pin<Box<tokio::time::Sleep>>>,
    /// `None` once the attempt ended.
    ending: Option<Ending>,
}

impl Supervised {
    /// The handler's result, a timeout, or an ignored cancellation: the handler is
    /// polled first, so that when it finishes in the same wake-up as the deadline its
    /// own result wins (its effects have happened; reporting a timeout would run them
    /// again).
    fn poll_outcome(&mut self, cx: &mut Context<'_>) -> Poll<Outcome> {
        let Some(handler) = &mut self.handler else {
            return Poll::Pending;
        };
        let polled = {
            let _in_span = self.ending.as_ref().map(|ending| ending.span.enter());
            self.longest_poll
                .time(|| std::panic::catch_unwind(AssertUnwindSafe(|| handler.as_mut().poll(cx))))
        };
        match polled {
            Ok(Poll::Pending) => {}
            Ok(Poll::Ready(Ok(value))) => return Poll::Ready(Ok(value)),
            Ok(Poll::Ready(Err(e))) if self.cancel.is_cancelled() => {
                return Poll::Ready(Err(unrecoverable(format!("cancelled: {}", e.message()))))
            }
            Ok(Poll::Ready(Err(e))) => {
                return Poll::Ready(Err(AttemptFailure {
                    reason: e.message().to_owned(),
                    retryable: e.is_retryable(),
                    is_final: false,
                    timed_out: e.timed_out(),
                    stack: e.chain_text(),
                }))
            }
            Err(panic) => {
                return Poll::Ready(Err(panicked(
                    crate::handler::panic::message(panic.as_ref()),
                    crate::handler::panic::take(),
                )))
            }
        }
        if let Some(limit) = self.timeout {
            let deadline = self
                .deadline
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
            if deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(AttemptFailure {
                    is_final: false,
                    timed_out: true,
                    reason: format!("timed out after {}", human(limit)),
                    retryable: true,
                    stack: None,
                }));
            }
        }
        if self.grace.is_none() {
            let cancel = &self.cancel;
            let cancelled = self
                .cancelled
                .get_or_insert_with(|| cancel.cancelled_owned());
            if cancelled.as_mut().poll(cx).is_ready() {
                self.cancelled = None;
                self.grace = Some(Box::pin(tokio::time::sleep(self.cancel_grace)));
            }
        }
        if let Some(grace) = &mut self.grace {
            if grace.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(unrecoverable(format!(
                    "cancelled: the handler did not stop within {} of the request",
                    human(self.cancel_grace)
                ))));
            }
        }
        Poll::Pending
    }
}

impl Future for Supervised {
    type Output = Outcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        // Every field is `Unpin` (the futures in it are boxed).
        let this = self.get_mut();
        let Poll::Ready(outcome) = this.poll_outcome(cx) else {
            return Poll::Pending;
        };
        // The handler's future goes before the attempt's end is reported (a timed-out
        // or ignored-cancellation handler is dropped here).
        this.handler = None;
        this.deadline = None;
        this.cancelled = None;
        this.grace = None;
        match this.ending.take() {
            Some(ending) => Poll::Ready(ending.finish(outcome, this.longest_poll.get())),
            None => Poll::Ready(outcome),
        }
    }
}

/// The failure's reason and record sealed, when its queue seals failure reasons
/// (`encrypt_failures_and_logs`); the reason as it was, then. One that cannot be sealed
/// (no keyring any more) is replaced by a reason that says so: a failure must still be
/// recorded, and not in clear.
fn seal_failure(sealer: &Sealer, failure: &mut AttemptFailure) -> Option<String> {
    if !sealer.seals_notes() {
        return None;
    }
    let seal = |text: &str| {
        sealer
            .seal_text(Field::FailedReason, text)
            .unwrap_or_else(|e| format!("the failure reason could not be sealed: {e}"))
    };
    let clear = std::mem::take(&mut failure.reason);
    failure.reason = seal(&clear);
    failure.stack = failure.stack.take().map(|stack| {
        // Cut until its sealed form fits whole under the engine's own cut (which would
        // break the envelope): JSON escapes and base64 make it grow by a measured
        // factor, not a fixed one.
        let mut limit = STACK_TEXT_LIMIT * 5 / 8;
        loop {
            let sealed = seal(&bounded_stack(stack.clone(), limit));
            if sealed.len() <= STACK_TEXT_LIMIT || limit < 256 {
                break sealed;
            }
            limit = limit * STACK_TEXT_LIMIT / sealed.len() * 9 / 10;
        }
    });
    Some(clear)
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
/// happened when the panic hook saw it (`handler::panic`).
fn panicked(message: &str, at: Option<String>) -> AttemptFailure {
    AttemptFailure {
        reason: format!("handler panicked: {message}"),
        retryable: true,
        is_final: false,
        timed_out: false,
        stack: at.map(|at| format!("handler panicked at {at}:\n{message}")),
    }
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
    fn durations_read_naturally() {
        assert_eq!(human(Duration::from_secs(30)), "30s");
        assert_eq!(human(Duration::from_millis(250)), "250ms");
    }
}
