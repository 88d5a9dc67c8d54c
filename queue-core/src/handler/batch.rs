//! Batch handlers (#46): `async fn(Batch<T>, Dep<A>, ..) -> Result<BatchResult, JobError>`,
//! one call for many jobs, each job's outcome its own.

use std::any::type_name;
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{deserialize_payload, ErasedHandler, Input};
use crate::deps::{Dep, DepInfo, Deps};
use crate::job::batch::{Arrival, BatchOutcome, Launcher, Ticket};
use crate::job::{Job, JobError, SharedFailure};

/// The jobs of one batch, in the order the queue gave them.
///
/// Each is an ordinary [`Job`]: its id, its attempt, its progress and log lines are
/// its own. A job whose payload does not fit `T` is not in the batch: it fails alone,
/// as with a single-job handler.
///
/// ```
/// use queue_core::worker::{Batch, BatchResult};
/// use queue_core::{JobError, Processor};
/// use std::time::Duration;
///
/// async fn send(batch: Batch<String>) -> Result<BatchResult, JobError> {
///     let mut result = BatchResult::new();
///     for job in &batch {
///         if job.data.is_empty() {
///             result.fail(job, JobError::unrecoverable("no address"));
///         }
///     }
///     Ok(result)
/// }
///
/// let mail = Processor::new("mail").batch(100, Duration::from_millis(20), send);
/// # let _ = mail;
/// ```
#[derive(Debug)]
pub struct Batch<T> {
    jobs: Vec<Job<T>>,
    /// Each job's attempt span, in the jobs' order.
    spans: Vec<tracing::Span>,
}

impl<T> Batch<T> {
    /// A batch of these jobs: for calling a batch handler in a unit test, with
    /// [`Job::for_test`] jobs, each given its own id ([`Job::with_test_meta`]).
    pub fn for_test(jobs: Vec<Job<T>>) -> Self {
        let spans = jobs.iter().map(|_| tracing::Span::none()).collect();
        Batch { jobs, spans }
    }

    /// The span of `job`'s attempt (queue, job id, name, attempt, trace id), as a
    /// single job's handler runs in: log about the job `in_scope` of it, or
    /// `instrument` a future with it, so that each job's logs and traces are its own.
    /// (A log line's explicit `parent:` works too, but `tracing-subscriber`'s JSON
    /// format lists only the entered spans.) A job of another batch gets a span that
    /// records nothing.
    ///
    /// ```
    /// use queue_core::prelude::*;
    ///
    /// async fn send(batch: Batch<String>) -> Result<BatchResult, JobError> {
    ///     for job in &batch {
    ///         batch.span_of(job).in_scope(|| tracing::info!(to = %job.data, "sent"));
    ///     }
    ///     Ok(BatchResult::new())
    /// }
    /// ```
    pub fn span_of(&self, job: &Job<T>) -> &tracing::Span {
        static NONE: std::sync::LazyLock<tracing::Span> =
            std::sync::LazyLock::new(tracing::Span::none);
        self.jobs
            .iter()
            .position(|j| j.id() == job.id())
            .and_then(|at| self.spans.get(at))
            .unwrap_or(&NONE)
    }

    /// How many jobs the batch holds.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Whether the batch holds no job (never so for a batch a worker hands over).
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The jobs.
    pub fn jobs(&self) -> &[Job<T>] {
        &self.jobs
    }

    /// The jobs, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, Job<T>> {
        self.jobs.iter()
    }

    /// The jobs, owned.
    pub fn into_jobs(self) -> Vec<Job<T>> {
        self.jobs
    }
}

impl<'a, T> IntoIterator for &'a Batch<T> {
    type Item = &'a Job<T>;
    type IntoIter = std::slice::Iter<'a, Job<T>>;

    fn into_iter(self) -> Self::IntoIter {
        self.jobs.iter()
    }
}

impl<T> IntoIterator for Batch<T> {
    type Item = Job<T>;
    type IntoIter = std::vec::IntoIter<Job<T>>;

    fn into_iter(self) -> Self::IntoIter {
        self.jobs.into_iter()
    }
}

/// What a batch handler says of its jobs: each completes (with no return value,
/// unless [`complete`](Self::complete) gives one) but those it [`fail`](Self::fail)s.
/// A failed job is retried by its own attempts and backoff; the others are done.
///
/// An `Err` from the handler, a panic or the processor's timeout fails every job of
/// the batch, as one attempt each.
///
/// ```
/// use queue_core::worker::BatchResult;
/// use queue_core::{Job, JobError};
///
/// // Test jobs, each with an id of its own (a batch's outcomes are by job id).
/// let sent = Job::for_test("ada@example.com").with_test_meta("mail-1", "send", 0);
/// let bounced = Job::for_test("nobody").with_test_meta("mail-2", "send", 0);
/// let mut result = BatchResult::new();
/// result
///     .complete(&sent, serde_json::json!({ "message_id": "m-1" }))
///     .fail(&bounced, JobError::unrecoverable("no such mailbox"));
/// assert_eq!(result.failures(), 1);
/// assert_eq!(result.return_value(&sent), Some(&serde_json::json!({ "message_id": "m-1" })));
/// assert!(result.failure(&bounced).is_some());
/// ```
#[derive(Debug, Default)]
pub struct BatchResult {
    outcomes: HashMap<String, BatchOutcome>,
}

impl BatchResult {
    /// Every job completes, with no return value.
    pub fn new() -> Self {
        BatchResult::default()
    }

    /// `job` completes with `value` as its return value. A value that does not
    /// serialize fails the job, saying so.
    pub fn complete<T, R: Serialize>(&mut self, job: &Job<T>, value: R) -> &mut Self {
        let outcome = serde_json::to_value(value).map_err(|e| {
            JobError::unrecoverable_msg(format!(
                "cannot serialize the return value ({}): {e}",
                type_name::<R>()
            ))
        });
        self.outcomes.insert(job.id().to_owned(), outcome);
        self
    }

    /// `job`'s attempt fails with `error`: retried if the error is retryable and the
    /// job has attempts left, failed for good otherwise.
    pub fn fail<T>(&mut self, job: &Job<T>, error: JobError) -> &mut Self {
        self.outcomes.insert(job.id().to_owned(), Err(error));
        self
    }

    /// How many jobs this result fails.
    pub fn failures(&self) -> usize {
        self.outcomes.values().filter(|o| o.is_err()).count()
    }

    /// What `job` returns, if it completes (`null` when no value was given); `None` if
    /// it fails. For unit tests of a batch handler.
    pub fn return_value<T>(&self, job: &Job<T>) -> Option<&serde_json::Value> {
        static NULL: serde_json::Value = serde_json::Value::Null;
        match self.outcomes.get(job.id()) {
            Some(Ok(value)) => Some(value),
            Some(Err(_)) => None,
            None => Some(&NULL),
        }
    }

    /// Why `job` fails, if it does. For unit tests of a batch handler.
    pub fn failure<T>(&self, job: &Job<T>) -> Option<&JobError> {
        self.outcomes.get(job.id()).and_then(|o| o.as_ref().err())
    }

    /// The outcome of the job `id`.
    fn take(&mut self, id: &str) -> BatchOutcome {
        self.outcomes
            .remove(id)
            .unwrap_or(Ok(serde_json::Value::Null))
    }
}

/// An async function that handles a batch of jobs: its first argument is
/// [`Batch<T>`], the others are [`Dep`]s, and it returns
/// `Result<BatchResult, JobError>`. Implemented for functions and closures of up to
/// four dependencies; you never implement it yourself.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a batch handler",
    label = "a batch handler is `async fn(Batch<T>, Dep<A>, ..) -> Result<BatchResult, JobError>` with `T: DeserializeOwned`"
)]
pub trait BatchHandler<Args>: Clone + Send + Sync + Sized + 'static {
    /// The payload type each job's data is deserialized into.
    type Payload: DeserializeOwned + Send + 'static;
    /// The handler's future.
    type Future: Future<Output = Result<BatchResult, JobError>> + Send + 'static;

    /// Calls the handler, or returns `None` when a dependency was not provided.
    #[doc(hidden)]
    fn call(&self, batch: Batch<Self::Payload>, deps: &Deps) -> Option<Self::Future>;

    /// The dependency types the handler asks for.
    #[doc(hidden)]
    fn dependencies() -> Vec<DepInfo>;
}

macro_rules! impl_batch_handler {
    ($($dep:ident),*) => {
        impl<F, Fut, T, $($dep,)*> BatchHandler<(Batch<T>, $(Dep<$dep>,)*)> for F
        where
            F: Fn(Batch<T>, $(Dep<$dep>,)*) -> Fut + Clone + Send + Sync + 'static,
            Fut: Future<Output = Result<BatchResult, JobError>> + Send + 'static,
            T: DeserializeOwned + Send + 'static,
            $($dep: Send + Sync + 'static,)*
        {
            type Payload = T;
            type Future = Fut;

            #[allow(non_snake_case, unused_variables)]
            fn call(&self, batch: Batch<T>, deps: &Deps) -> Option<Fut> {
                $(let $dep = deps.get::<$dep>()?;)*
                Some((self)(batch, $($dep,)*))
            }

            fn dependencies() -> Vec<DepInfo> {
                vec![$(DepInfo::of::<$dep>(),)*]
            }
        }
    };
}

impl_batch_handler!();
impl_batch_handler!(A1);
impl_batch_handler!(A1, A2);
impl_batch_handler!(A1, A2, A3);
impl_batch_handler!(A1, A2, A3, A4);

impl ErasedHandler {
    /// Erases a batch handler's types. Each job's attempt runs this: the payload is
    /// deserialized (a misfit fails that job alone), the job handed in to its batch,
    /// and the attempt's outcome is the job's part of the batch's result.
    pub fn batch<H: BatchHandler<Args>, Args>(handler: H) -> Self {
        let run = move |mut job: Job<serde_json::Value>, deps: Arc<Deps>, input: Input| {
            let handler = handler.clone();
            let run: futures::future::BoxFuture<'static, _> = Box::pin(async move {
                let Some(ticket) = job.take_batch_ticket() else {
                    return Err(JobError::unrecoverable_msg(
                        "a batch handler's job came without its batch",
                    ));
                };
                // A payload that does not fit fails here, and its ticket leaves the batch.
                let typed = deserialize_payload::<H::Payload>(job, input)?;
                let timeout = ticket.timeout();
                let launcher: Launcher =
                    Box::new(move |arrived| launch(handler, deps, timeout, arrived));
                // Polled in the attempt's span (the worker's supervision enters it).
                let span = tracing::Span::current();
                ticket
                    .arrive(Box::new(typed), span, launcher)
                    .await
                    .unwrap_or_else(|_| {
                        Err(JobError::with_message(
                            true,
                            "the batch ended without this job's outcome",
                        ))
                    })
            });
            run
        };
        ErasedHandler {
            payload_type: type_name::<H::Payload>(),
            payload_id: std::any::TypeId::of::<H::Payload>(),
            dependencies: H::dependencies(),
            accepts_null: serde_json::from_value::<H::Payload>(serde_json::Value::Null).is_ok(),
            reads_children: false,
            check: super::fits::<H::Payload>,
            batch: true,
            run: Arc::new(run),
        }
    }
}

/// Runs the batch handler over the jobs handed in, in a task of its own (so that no
/// one job's attempt carries it), under `catch_unwind` and the batch's timeout, and
/// sends each job its outcome.
fn launch<H: BatchHandler<Args>, Args>(
    handler: H,
    deps: Arc<Deps>,
    timeout: Option<Duration>,
    arrived: Vec<Arrival>,
) {
    let mut jobs = Vec::with_capacity(arrived.len());
    let mut spans = Vec::with_capacity(arrived.len());
    let mut senders = Vec::with_capacity(arrived.len());
    for (job, span, sender) in arrived {
        // Every arrival of a batch comes from this handler's erasure: the same type.
        if let Ok(job) = job.downcast::<Job<H::Payload>>() {
            senders.push((job.id().to_owned(), sender));
            jobs.push(*job);
            spans.push(span);
        }
    }
    tokio::spawn(async move {
        let batch = Batch { jobs, spans };
        let run = AssertUnwindSafe(async move {
            match handler.call(batch, &deps) {
                Some(future) => future.await,
                None => Err(super::missing_dependencies(H::dependencies(), &deps)),
            }
        })
        .catch_unwind();
        let outcome = match timeout {
            Some(limit) => match tokio::time::timeout(limit, run).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    let reason = format!("the batch timed out after {limit:?}");
                    let how = SharedFailure {
                        timed_out: true,
                        stack: None,
                    };
                    return fail_all(senders, true, &reason, how);
                }
            },
            None => run.await,
        };
        let mut result = match outcome {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => {
                let how = SharedFailure {
                    timed_out: false,
                    stack: error.chain_text(),
                };
                return fail_all(senders, error.is_retryable(), error.message(), how);
            }
            Err(panic) => {
                let message = super::panic::message(panic.as_ref());
                // Read on this thread, in this poll: where the panic noted it.
                let stack = super::panic::take()
                    .map(|at| format!("batch handler panicked at {at}:\n{message}"));
                let reason = format!("batch handler panicked: {message}");
                let how = SharedFailure {
                    timed_out: false,
                    stack,
                };
                return fail_all(senders, true, &reason, how);
            }
        };
        for (id, sender) in senders {
            let _ = sender.send(result.take(&id));
        }
    });
}

/// The whole batch's failure, as each job's attempt's: its reason, and how it ended
/// (a timeout; the stack text each job records).
fn fail_all(
    senders: Vec<(String, tokio::sync::oneshot::Sender<BatchOutcome>)>,
    retryable: bool,
    reason: &str,
    how: SharedFailure,
) {
    for (_, sender) in senders {
        let _ = sender.send(Err(JobError::shared(retryable, reason, how.clone())));
    }
}

/// A batch handler's job run where there are no batches (an inline app, the testing
/// kit): a batch of one.
pub(crate) fn alone(
    job: Job<serde_json::Value>,
    timeout: Option<Duration>,
) -> Job<serde_json::Value> {
    job.in_batch(Ticket::alone(timeout))
}
