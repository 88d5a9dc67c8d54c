//! Adds what the engine's events lack (job name, attempt, whether it was the last, the
//! job's data) and publishes them as `WorkerEvent`s.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::broadcast;

use crate::engine::{EngineEvent, EventSink};
use crate::events::WorkerEvent;

#[derive(Debug, Clone)]
struct AttemptFacts {
    name: String,
    attempt: u32,
    max_attempts: u32,
    is_final: bool,
    /// The job's data, kept only while someone listens (typed listeners read it).
    data: Option<Arc<serde_json::Value>>,
}

/// Facts about one queue's attempts: those running, keyed by job id, from the start;
/// and those that failed, in order per job id, until the engine reports each failure.
/// (A fast retry starts the next attempt before the engine's report of the last one
/// arrives: keyed by job id alone, the report would get the new attempt's facts.)
#[derive(Debug)]
pub(crate) struct AttemptTracker {
    queue: String,
    running: Mutex<HashMap<String, AttemptFacts>>,
    failed: Mutex<HashMap<String, VecDeque<AttemptFacts>>>,
    events: broadcast::Sender<WorkerEvent>,
}

impl AttemptTracker {
    pub(crate) fn new(queue: String, events: broadcast::Sender<WorkerEvent>) -> Self {
        AttemptTracker {
            queue,
            running: Mutex::new(HashMap::new()),
            failed: Mutex::new(HashMap::new()),
            events,
        }
    }

    fn facts(&self) -> std::sync::MutexGuard<'_, HashMap<String, AttemptFacts>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn started(&self, job_id: &str, name: &str, attempt: u32, max_attempts: u32) {
        // Kept even while nobody listens: a listener that subscribes during the attempt
        // must still be told truly whether its failure was the last.
        let facts = AttemptFacts {
            name: name.to_owned(),
            attempt,
            max_attempts,
            is_final: attempt >= max_attempts,
            data: None,
        };
        self.facts().insert(job_id.to_owned(), facts);
        if !self.listening() {
            return;
        }
        self.publish(WorkerEvent::Active {
            queue: self.queue.clone(),
            job_id: job_id.to_owned(),
            name: name.to_owned(),
            attempt,
        });
    }

    /// Keeps the running attempt's data for its completion, failure and progress
    /// events, when someone listens to them (a copy of the payload per attempt
    /// otherwise wasted).
    pub(crate) fn data(&self, job_id: &str, data: &serde_json::Value) {
        if !self.listening() {
            return;
        }
        if let Some(facts) = self.facts().get_mut(job_id) {
            facts.data = Some(Arc::new(data.clone()));
        }
    }

    /// Reports a job that is run again because an earlier run was lost.
    pub(crate) fn stalled(&self, job_id: &str) {
        self.publish(WorkerEvent::Stalled {
            queue: self.queue.clone(),
            job_id: job_id.to_owned(),
        });
    }

    /// Reports a handler that held its thread too long in one poll.
    pub(crate) fn blocked(&self, job_id: &str, name: &str, blocked_for: std::time::Duration) {
        self.publish(WorkerEvent::Blocked {
            queue: self.queue.clone(),
            job_id: job_id.to_owned(),
            name: name.to_owned(),
            blocked_for,
        });
    }

    /// Records that the running attempt of `job_id` failed, and whether it was the
    /// job's last, until the engine reports the failure.
    pub(crate) fn failed(&self, job_id: &str, is_final: bool) {
        let Some(mut facts) = self.facts().remove(job_id) else {
            return;
        };
        facts.is_final = is_final;
        self.failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(job_id.to_owned())
            .or_default()
            .push_back(facts);
    }

    /// The facts of `job_id`'s oldest failure not reported yet.
    fn take_failed(&self, job_id: &str) -> Option<AttemptFacts> {
        let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
        let queue = failed.get_mut(job_id)?;
        let facts = queue.pop_front();
        if queue.is_empty() {
            failed.remove(job_id);
        }
        facts
    }

    /// The name and data of the attempt a progress report is about: the running one,
    /// or one that has just failed (its report travels the engine's event channel, so
    /// it can arrive after the worker recorded the failure).
    fn progress_facts(&self, job_id: &str) -> Option<(String, Option<Arc<serde_json::Value>>)> {
        if let Some(f) = self.facts().get(job_id) {
            return Some((f.name.clone(), f.data.clone()));
        }
        let failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
        let f = failed.get(job_id)?.back()?;
        Some((f.name.clone(), f.data.clone()))
    }

    /// Turns an engine event into ours.
    pub(crate) fn on_engine_event(&self, event: EngineEvent) {
        let queue = self.queue.clone();
        let event = match event {
            EngineEvent::Completed { job_id, result } => {
                let (name, data) = self
                    .facts()
                    .remove(&job_id)
                    .map(|f| (f.name, f.data))
                    .unwrap_or_default();
                WorkerEvent::Completed {
                    queue,
                    name,
                    job_id,
                    return_value: result,
                    data,
                }
            }
            EngineEvent::Failed { job_id, reason } => {
                let facts = self
                    .take_failed(&job_id)
                    .or_else(|| self.facts().remove(&job_id));
                let facts = facts.unwrap_or(AttemptFacts {
                    name: String::new(),
                    attempt: 0,
                    max_attempts: 0,
                    is_final: true,
                    data: None,
                });
                WorkerEvent::Failed {
                    queue,
                    job_id,
                    name: facts.name,
                    reason,
                    attempt: facts.attempt,
                    max_attempts: facts.max_attempts,
                    is_final: facts.is_final,
                    data: facts.data,
                }
            }
            EngineEvent::Progress { job_id, progress } => {
                let (name, data) = self.progress_facts(&job_id).unwrap_or_default();
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
                tracing::warn!(queue = %queue, error = %message, "worker error; it keeps retrying");
                WorkerEvent::Error { queue, message }
            }
        };
        self.publish(event);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_carry_attempt_facts_and_finality() {
        let (tx, mut rx) = broadcast::channel(8);
        let tracker = AttemptTracker::new("email".into(), tx);
        tracker.started("j1", "welcome", 2, 3);
        tracker.failed("j1", false);
        tracker.on_engine_event(EngineEvent::Failed {
            job_id: "j1".into(),
            reason: "smtp down".into(),
        });
        assert!(matches!(
            rx.try_recv().unwrap(),
            WorkerEvent::Active { attempt: 2, .. }
        ));
        match rx.try_recv().unwrap() {
            WorkerEvent::Failed {
                name,
                attempt,
                max_attempts,
                is_final,
                ..
            } => {
                assert_eq!(
                    (name.as_str(), attempt, max_attempts, is_final),
                    ("welcome", 2, 3, false)
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(
            tracker.facts().is_empty(),
            "facts are dropped once reported"
        );
    }

    #[test]
    fn completions_failures_and_progress_carry_the_jobs_data_while_someone_listens() {
        let (tx, mut rx) = broadcast::channel(8);
        let tracker = AttemptTracker::new("email".into(), tx);
        let data = serde_json::json!({"to": "ada"});
        tracker.started("j1", "welcome", 1, 1);
        tracker.data("j1", &data);
        tracker.on_engine_event(EngineEvent::Progress {
            job_id: "j1".into(),
            progress: serde_json::json!(50),
        });
        tracker.on_engine_event(EngineEvent::Completed {
            job_id: "j1".into(),
            result: serde_json::Value::Null,
        });
        let _active = rx.try_recv().unwrap();
        assert_eq!(rx.try_recv().unwrap().job_data(), Some(&data));
        assert_eq!(rx.try_recv().unwrap().job_data(), Some(&data));
        tracker.started("j2", "welcome", 1, 1);
        tracker.data("j2", &data);
        tracker.failed("j2", true);
        tracker.on_engine_event(EngineEvent::Failed {
            job_id: "j2".into(),
            reason: "no".into(),
        });
        let _active = rx.try_recv().unwrap();
        assert_eq!(rx.try_recv().unwrap().job_data(), Some(&data));

        // Nobody listening: nothing copied.
        drop(rx);
        tracker.started("j3", "welcome", 1, 1);
        tracker.data("j3", &data);
        assert!(tracker.facts()["j3"].data.is_none());
    }

    /// The next attempt starts before the engine's report of the last one arrives (a
    /// fast retry): the report still carries the attempt it is about.
    #[tokio::test]
    async fn a_failure_report_overtaken_by_the_retry_keeps_its_own_attempt() {
        let (events, mut received) = broadcast::channel(16);
        let tracker = AttemptTracker::new("q".into(), events);
        tracker.started("j1", "send", 1, 3);
        tracker.failed("j1", false);
        tracker.started("j1", "send", 2, 3);
        tracker.on_engine_event(EngineEvent::Failed {
            job_id: "j1".into(),
            reason: "nope".into(),
        });
        let mut failures = Vec::new();
        while let Ok(event) = received.try_recv() {
            if let WorkerEvent::Failed {
                attempt, is_final, ..
            } = event
            {
                failures.push((attempt, is_final));
            }
        }
        assert_eq!(failures, [(1, false)]);
        // The second attempt's facts are still there for its own report.
        tracker.failed("j1", false);
        tracker.on_engine_event(EngineEvent::Failed {
            job_id: "j1".into(),
            reason: "nope".into(),
        });
        match received.try_recv() {
            Ok(WorkerEvent::Failed { attempt, .. }) => assert_eq!(attempt, 2),
            other => panic!("{other:?}"),
        }
    }
}
