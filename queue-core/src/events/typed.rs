//! What a typed `#[on_worker_event]` listener receives, NestJS's
//! `onFailed(job, err)` shape: the job with its payload as a type, then the failure,
//! the typed output or the progress value. The expansion of the attribute calls
//! [`TypedListener`] to turn a [`WorkerEvent`] into those arguments.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::WorkerEvent;

/// The job a worker event is about, with its payload as `T`: the first argument of a
/// typed [`#[on_worker_event]`](crate::on_worker_event) listener.
///
/// ```no_run
/// use queue_core::prelude::*;
/// use queue_core::{events::EventJob, events::JobFailure};
///
/// #[derive(Serialize, Deserialize)]
/// pub struct WelcomeEmail { pub to: String }
///
/// #[job_queue("email")]
/// pub enum Email {
///     #[job("welcome")]
///     Welcome(WelcomeEmail),
/// }
///
/// // Called when a welcome email fails for good (drop `final_only`: on every attempt).
/// #[on_worker_event(Email, failed, final_only)]
/// async fn alert(job: EventJob<WelcomeEmail>, failure: JobFailure) {
///     tracing::error!(job = %job.id, to = %job.data.to, reason = %failure.reason, "welcome email lost");
/// }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EventJob<T> {
    /// The queue.
    pub queue: String,
    /// The job id.
    pub id: String,
    /// The job name.
    pub name: String,
    /// The payload, as the attempt received it.
    pub data: T,
}

/// A failed attempt, as a typed `failed` listener receives it after the job.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobFailure {
    /// The failure reason stored on the job.
    pub reason: String,
    /// The attempt that failed, 1-based.
    pub attempt: u32,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// No retry follows: the job is now `failed`.
    pub is_final: bool,
}

/// Turns worker events into a listener's arguments. Not public API: the expansion of
/// `#[on_worker_event]` builds one per listener.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct TypedListener {
    /// The listener's path, for logs.
    pub label: &'static str,
    /// Only jobs of this name (a declared job type's, or `job = ".."`).
    pub job_name: Option<&'static str>,
    /// Only failures no retry follows.
    pub final_only: bool,
}

impl TypedListener {
    /// The event itself, for an untyped listener (`final_only` still applies).
    pub fn event(&self, event: WorkerEvent) -> Option<WorkerEvent> {
        match &event {
            WorkerEvent::Failed { is_final, .. } if self.final_only && !is_final => None,
            _ => Some(event),
        }
    }

    /// The job and the failure, for a `failed` listener.
    pub fn failed<T: DeserializeOwned>(
        &self,
        event: WorkerEvent,
    ) -> Option<(EventJob<T>, JobFailure)> {
        let WorkerEvent::Failed {
            queue,
            job_id,
            name,
            reason,
            attempt,
            max_attempts,
            is_final,
            data,
        } = self.event(event)?
        else {
            return None;
        };
        let job = self.job(queue, job_id, name, data)?;
        let failure = JobFailure {
            reason,
            attempt,
            max_attempts,
            is_final,
        };
        Some((job, failure))
    }

    /// The job and its output as `O`, for a `completed` listener.
    pub fn completed<T: DeserializeOwned, O: DeserializeOwned>(
        &self,
        event: WorkerEvent,
    ) -> Option<(EventJob<T>, O)> {
        let WorkerEvent::Completed {
            queue,
            job_id,
            name,
            return_value,
            data,
        } = event
        else {
            return None;
        };
        let job = self.job(queue, job_id, name, data)?;
        let output = self.decode(&job.id, "output", return_value)?;
        Some((job, output))
    }

    /// The job and the reported progress as `P`, for a `progress` listener.
    pub fn progress<T: DeserializeOwned, P: DeserializeOwned>(
        &self,
        event: WorkerEvent,
    ) -> Option<(EventJob<T>, P)> {
        let WorkerEvent::Progress {
            queue,
            job_id,
            name,
            progress,
            data,
        } = event
        else {
            return None;
        };
        let job = self.job(queue, job_id, name, data)?;
        let progress = self.decode(&job.id, "progress", progress)?;
        Some((job, progress))
    }

    /// The job, when it is one this listener takes: its name matches, and its data
    /// reads as `T`.
    fn job<T: DeserializeOwned>(
        &self,
        queue: String,
        id: String,
        name: String,
        data: Option<Arc<Value>>,
    ) -> Option<EventJob<T>> {
        if self.job_name.is_some_and(|wanted| name != wanted) {
            return None;
        }
        let Some(data) = data else {
            tracing::warn!(
                listener = self.label,
                job_id = %id,
                "the job's data was not kept for this event; the listener is not called"
            );
            return None;
        };
        let data = match T::deserialize(&*data) {
            Ok(data) => data,
            Err(error) => {
                tracing::warn!(
                    listener = self.label,
                    job_id = %id,
                    job_name = %name,
                    %error,
                    "the job's data does not fit the listener's payload type; the listener is not called"
                );
                return None;
            }
        };
        Some(EventJob {
            queue,
            id,
            name,
            data,
        })
    }

    fn decode<V: DeserializeOwned>(&self, job_id: &str, what: &str, value: Value) -> Option<V> {
        match serde_json::from_value(value) {
            Ok(value) => Some(value),
            Err(error) => {
                tracing::warn!(
                    listener = self.label,
                    job_id,
                    %error,
                    "the job's {what} does not fit the listener's type; the listener is not called"
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(name: &str, data: Value, is_final: bool) -> WorkerEvent {
        WorkerEvent::Failed {
            queue: "email".into(),
            job_id: "j1".into(),
            name: name.into(),
            reason: "smtp down".into(),
            attempt: 2,
            max_attempts: 3,
            is_final,
            data: Some(Arc::new(data)),
        }
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Welcome {
        to: String,
    }

    const WELCOME: TypedListener = TypedListener {
        label: "tests::welcome",
        job_name: Some("welcome"),
        final_only: false,
    };

    #[test]
    fn a_failure_of_the_listeners_job_type_becomes_its_arguments() {
        let (job, failure) = WELCOME
            .failed::<Welcome>(failed("welcome", serde_json::json!({"to": "ada"}), false))
            .unwrap();
        assert_eq!(job.data, Welcome { to: "ada".into() });
        assert_eq!(
            (job.queue.as_str(), job.id.as_str(), job.name.as_str()),
            ("email", "j1", "welcome")
        );
        assert_eq!(
            failure,
            JobFailure {
                reason: "smtp down".into(),
                attempt: 2,
                max_attempts: 3,
                is_final: false
            }
        );
    }

    #[test]
    fn other_job_names_retried_failures_and_misfits_are_not_for_the_listener() {
        let ada = || serde_json::json!({"to": "ada"});
        assert!(WELCOME
            .failed::<Welcome>(failed("digest", ada(), true))
            .is_none());
        let last_only = TypedListener {
            final_only: true,
            ..WELCOME
        };
        assert!(last_only
            .failed::<Welcome>(failed("welcome", ada(), false))
            .is_none());
        assert!(last_only
            .failed::<Welcome>(failed("welcome", ada(), true))
            .is_some());
        assert!(WELCOME
            .failed::<Welcome>(failed("welcome", serde_json::json!({"week": 1}), true))
            .is_none());
        assert!(last_only.event(failed("welcome", ada(), false)).is_none());
    }

    #[test]
    fn completions_and_progress_carry_typed_values() {
        let completed = WorkerEvent::Completed {
            queue: "email".into(),
            job_id: "j1".into(),
            name: "welcome".into(),
            return_value: serde_json::json!(42),
            data: Some(Arc::new(serde_json::json!({"to": "ada"}))),
        };
        let (job, output) = WELCOME.completed::<Welcome, u32>(completed).unwrap();
        assert_eq!((job.data.to.as_str(), output), ("ada", 42));
        let progress = |name: &str| WorkerEvent::Progress {
            queue: "email".into(),
            job_id: "j1".into(),
            name: name.into(),
            progress: serde_json::json!({"done": 1}),
            data: Some(Arc::new(serde_json::json!({"to": "ada"}))),
        };
        let (job, value) = WELCOME
            .progress::<Welcome, Value>(progress("welcome"))
            .unwrap();
        assert_eq!(
            (job.name.as_str(), value["done"].as_u64()),
            ("welcome", Some(1))
        );
        // Another job type's progress, even with data that would fit: not ours.
        assert!(WELCOME
            .progress::<Welcome, Value>(progress("digest"))
            .is_none());
    }
}
