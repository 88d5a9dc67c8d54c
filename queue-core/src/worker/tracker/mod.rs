//! Adds what the engine's events lack (job name, attempt, whether it was the last, the
//! job's data) and publishes them as `WorkerEvent`s.
//!
//! An attempt's facts are kept from its start. Its own outcome, as the worker saw it,
//! ends them ([`AttemptTracker::ended`]): what is left waits for the engine's report
//! of the finished attempt (`Completed`, `Failed`), which comes once Redis recorded
//! it, and gives the report its facts. A report can be lost (the engine's event
//! channel was full, [`EngineEvent::Dropped`]), so nothing depends on one arriving:
//! facts whose report does not come are let go after a while, and never more than
//! [`MAX_AWAITING`] wait.

use crate::encryption::{sealed_with, Field, Sealer};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::broadcast;

use crate::backend::{EngineEvent, EventSink};
use crate::events::WorkerEvent;
use crate::job::JobMeta;
use crate::slab::{Slab, SlabKey};

/// Facts waiting for their report, at most (the oldest go first).
const MAX_AWAITING: usize = 10_000;
/// How long facts wait for their report. A report comes right after the attempt's
/// end, unless Redis was away and the engine is sending the job's move again.
const REPORT_WITHIN: Duration = Duration::from_secs(10 * 60);
/// Once the engine said it dropped events, facts that have waited this long since
/// their attempt ended are let go: their report was most likely among those dropped,
/// and would otherwise be paired with a later attempt's report.
const AFTER_A_DROP: Duration = Duration::from_secs(2);
/// Bookkeeping is swept at most this often.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// Dropped events are warned about at most this often.
const WARN_DROPS_EVERY: Duration = Duration::from_secs(60);

/// An attempt's facts: its job's (id, name, attempt, attempts allowed), shared with the
/// attempt rather than copied.
#[derive(Debug, Clone)]
struct AttemptFacts {
    job: Arc<JobMeta>,
    /// The job's data, kept only while someone listens (typed listeners read it).
    data: Option<Arc<serde_json::Value>>,
}

/// How an attempt ended, as its worker saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttemptOutcome<'a> {
    Completed,
    Failed {
        reason: &'a str,
        is_final: bool,
    },
    /// Another run holds the job now: nothing to report (the keeper said `LockLost`).
    LockLost,
}

/// An ended attempt whose report has not come yet.
#[derive(Debug)]
struct Awaiting {
    facts: AttemptFacts,
    /// `None` for a completion; the reason and finality of a failure.
    failure: Option<(String, bool)>,
    ended: Instant,
}

/// One running attempt, as [`AttemptTracker::started`] knows it: two runs of one job
/// may overlap in a process (a run that lost its lock, still stopping, and the run that
/// took the job over), so the job id alone does not name an attempt. Its slot in
/// [`Running`], whose stamp also tells the order of starts.
#[derive(Debug)]
pub(crate) struct TrackedAttempt(SlabKey);

/// The running attempts, each in a slot of its own: slots are reused, so that a start
/// and an end cost neither an allocation nor a hashed entry.
#[derive(Debug, Default)]
struct Running(Slab<AttemptFacts>);

impl Running {
    fn start(&mut self, facts: AttemptFacts) -> TrackedAttempt {
        TrackedAttempt(self.0.insert(facts))
    }

    fn get_mut(&mut self, attempt: &TrackedAttempt) -> Option<&mut AttemptFacts> {
        self.0.get_mut(attempt.0)
    }

    fn end(&mut self, attempt: &TrackedAttempt) -> Option<AttemptFacts> {
        self.0.remove(attempt.0)
    }

    /// The newest running attempt of `job_id`.
    fn newest(&self, job_id: &str) -> Option<&AttemptFacts> {
        self.0
            .iter()
            .filter(|(_, facts)| facts.job.id == job_id)
            .max_by_key(|(key, _)| key.stamp)
            .map(|(_, facts)| facts)
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.0.iter().next().is_none()
    }
}

#[derive(Debug)]
struct Book {
    running: Running,
    /// In the order the attempts ended: a report comes in about that order, so its
    /// attempt is found near the front, by job id (a fast retry ends the next attempt
    /// of a job before the engine's report of the last one arrives).
    awaiting: VecDeque<Awaiting>,
    swept: Instant,
    drop_seen: Option<Instant>,
    drops_warned: Option<Instant>,
}

/// Facts about one queue's attempts, for its worker events.
pub(crate) struct AttemptTracker {
    queue: String,
    book: Mutex<Book>,
    events: broadcast::Sender<WorkerEvent>,
    /// Opens what the queue seals, for the events: listeners are the application's
    /// code, in this process.
    sealer: Option<Sealer>,
    #[cfg(feature = "metrics")]
    metrics: Option<crate::metrics::QueueMetrics>,
}

impl std::fmt::Debug for AttemptTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttemptTracker")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl AttemptTracker {
    pub(crate) fn new(queue: String, events: broadcast::Sender<WorkerEvent>) -> Self {
        AttemptTracker {
            queue,
            book: Mutex::new(Book {
                running: Running::default(),
                awaiting: VecDeque::new(),
                swept: Instant::now(),
                drop_seen: None,
                drops_warned: None,
            }),
            events,
            sealer: None,
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }

    /// Opens sealed payloads, return values and failure reasons for the events.
    pub(crate) fn with_sealer(mut self, sealer: &Sealer) -> Self {
        self.sealer = Some(sealer.clone());
        self
    }

    /// `value`, a `field` of this queue's jobs, opened for a listener when it is sealed;
    /// as stored when it does not open (the job's own failure says why).
    fn opened(&self, field: Field, value: serde_json::Value) -> serde_json::Value {
        match &self.sealer {
            Some(sealer) if sealed_with(&value).is_some() => {
                sealer.open(field, value.clone()).unwrap_or(value)
            }
            _ => value,
        }
    }

    /// Records the dropped engine events in `metrics` too.
    #[cfg(feature = "metrics")]
    pub(crate) fn with_metrics(mut self, metrics: Option<crate::metrics::QueueMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn started(&self, job: &Arc<JobMeta>) -> TrackedAttempt {
        // Kept even while nobody listens: a listener that subscribes during the attempt
        // must still be told truly whether its failure was the last. Shared, not copied.
        let facts = AttemptFacts {
            job: job.clone(),
            data: None,
        };
        let tracked = self.book().running.start(facts);
        if self.listening() {
            self.publish(WorkerEvent::Active {
                queue: self.queue.clone(),
                job_id: job.id.clone(),
                name: job.name.clone(),
                attempt: job.attempt(),
            });
        }
        tracked
    }

    /// Keeps a running attempt's data for its completion, failure and progress events,
    /// when someone listens to them (a copy of the payload per attempt otherwise
    /// wasted).
    pub(crate) fn data(&self, attempt: &TrackedAttempt, data: &serde_json::Value) {
        if !self.listening() {
            return;
        }
        let data = self.opened(Field::Data, data.clone());
        if let Some(facts) = self.book().running.get_mut(attempt) {
            facts.data = Some(Arc::new(data));
        }
    }

    /// Ends a running attempt with its own outcome; a completion or a failure then
    /// waits for the engine's report.
    pub(crate) fn ended(&self, attempt: &TrackedAttempt, outcome: AttemptOutcome<'_>) {
        let now = Instant::now();
        let mut book = self.book();
        let Some(facts) = book.running.end(attempt) else {
            return;
        };
        let failure = match outcome {
            AttemptOutcome::LockLost => return,
            AttemptOutcome::Completed => None,
            AttemptOutcome::Failed { reason, is_final } => Some((reason.to_owned(), is_final)),
        };
        book.awaiting.push_back(Awaiting {
            facts,
            failure,
            ended: now,
        });
        book.sweep(now);
    }

    /// Reports a job that is run again because an earlier run was lost.
    pub(crate) fn stalled(&self, job_id: &str) {
        self.publish(WorkerEvent::Stalled {
            queue: self.queue.clone(),
            job_id: job_id.to_owned(),
        });
    }

    /// Reports a handler that held its thread too long in one poll.
    pub(crate) fn blocked(&self, job_id: &str, name: &str, blocked_for: Duration) {
        self.publish(WorkerEvent::Blocked {
            queue: self.queue.clone(),
            job_id: job_id.to_owned(),
            name: name.to_owned(),
            blocked_for,
        });
    }

    /// Turns an engine event into ours.
    pub(crate) fn on_engine_event(&self, event: EngineEvent) {
        if !self.listening() {
            self.unheard(event);
            return;
        }
        let queue = self.queue.clone();
        let event = match event {
            EngineEvent::Completed { job_id, result } => {
                let (name, data) = self
                    .book()
                    .take_report(&job_id, None)
                    .map(|f| (f.facts.job.name.clone(), f.facts.data))
                    .unwrap_or_default();
                WorkerEvent::Completed {
                    queue,
                    name,
                    job_id,
                    return_value: self.opened(Field::ReturnValue, result),
                    data,
                }
            }
            EngineEvent::Failed { job_id, reason } => {
                // Opened first: the attempt's own report holds the reason as the
                // handler gave it.
                let reason = match &self.sealer {
                    Some(sealer) => sealer
                        .open_text(Field::FailedReason, reason.clone())
                        .unwrap_or(reason),
                    None => reason,
                };
                let taken = self.book().take_report(&job_id, Some(&reason));
                let is_final = match &taken {
                    Some(Awaiting {
                        failure: Some((_, is_final)),
                        ..
                    }) => *is_final,
                    // A completion the engine turned into a failure (its move was
                    // refused): final when no attempt is left.
                    Some(Awaiting { facts, .. }) => facts.job.attempt() >= facts.job.max_attempts(),
                    // Failed by the engine without running (a parent's failure passed
                    // on, too many starts): for good, and no attempt to tell of.
                    None => true,
                };
                let facts = taken.map(|awaiting| awaiting.facts);
                let job = facts.as_ref().map(|facts| &facts.job);
                WorkerEvent::Failed {
                    queue,
                    job_id,
                    name: job.map(|job| job.name.clone()).unwrap_or_default(),
                    reason,
                    attempt: job.map_or(0, |job| job.attempt()),
                    max_attempts: job.map_or(0, |job| job.max_attempts()),
                    is_final,
                    data: facts.and_then(|facts| facts.data),
                }
            }
            EngineEvent::Progress { job_id, progress } => {
                let (name, data) = self.book().progress_facts(&job_id).unwrap_or_default();
                WorkerEvent::Progress {
                    queue,
                    job_id,
                    name,
                    progress,
                    data,
                }
            }
            EngineEvent::Stalled { job_id } => WorkerEvent::Stalled { queue, job_id },
            EngineEvent::LockLost { job_id } => WorkerEvent::LockLost { queue, job_id },
            EngineEvent::Drained => WorkerEvent::Drained { queue },
            EngineEvent::Error { message } => {
                // The engine says once that it lost Redis and once that it is back;
                // each retry's error is a detail.
                tracing::debug!(queue = %queue, error = %message, "worker error; it keeps retrying");
                WorkerEvent::Error { queue, message }
            }
            EngineEvent::Dropped { count } => {
                self.dropped(count);
                return;
            }
        };
        self.publish(event);
    }

    /// An engine event nobody listens to: only the bookkeeping its report closes, and
    /// what is counted or logged whether or not anyone listens. A listener that
    /// subscribes later gets the reports that come after it.
    fn unheard(&self, event: EngineEvent) {
        match event {
            EngineEvent::Completed { job_id, .. } => {
                self.book().take_report(&job_id, None);
            }
            EngineEvent::Failed { job_id, reason } => {
                self.book().take_report(&job_id, Some(&reason));
            }
            EngineEvent::Error { message } => {
                tracing::debug!(queue = %self.queue, error = %message, "worker error; it keeps retrying");
            }
            EngineEvent::Dropped { count } => self.dropped(count),
            EngineEvent::Progress { .. }
            | EngineEvent::Stalled { .. }
            | EngineEvent::LockLost { .. }
            | EngineEvent::Drained => {}
        }
    }

    /// The engine dropped `count` events (its channel was full): counted, warned about
    /// now and then, and the facts their reports would have taken are let go soon.
    fn dropped(&self, count: u64) {
        #[cfg(feature = "metrics")]
        if let Some(metrics) = &self.metrics {
            metrics.events_dropped(count);
        }
        let now = Instant::now();
        let mut book = self.book();
        book.drop_seen = Some(now);
        book.sweep(now);
        if book
            .drops_warned
            .is_none_or(|warned| now.duration_since(warned) >= WARN_DROPS_EVERY)
        {
            book.drops_warned = Some(now);
            tracing::warn!(
                queue = %self.queue,
                dropped = count,
                "the worker's engine events came faster than this process read them; some \
                 were dropped (worker events and listeners miss them; jobs are not affected)"
            );
        }
    }

    fn listening(&self) -> bool {
        self.events.receiver_count() > 0
    }

    fn publish(&self, event: WorkerEvent) {
        // An error only means nobody listens right now.
        let _ = self.events.send(event);
    }
}

impl EventSink for AttemptTracker {
    fn deliver(&self, event: EngineEvent) {
        self.on_engine_event(event);
    }

    fn listening(&self) -> bool {
        AttemptTracker::listening(self)
    }
}

mod book;
#[cfg(test)]
mod tests;
