//! What a flow parent's children returned, typed: the second argument a parent's handler
//! receives. It sits with `Job<T>`, below the flows that add the children, because a
//! handler reads it without knowing how its children were added.

use std::any::type_name;

use serde::de::DeserializeOwned;

use super::error::JobError;
use crate::encryption::{open_in, open_text_in, sealed_with, Field, Keys};

/// A flow child, named by its queue and job id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct ChildKey {
    /// The child's queue.
    pub queue: String,
    /// The child's job id.
    pub id: String,
}

impl ChildKey {
    /// A key naming job `id` of `queue`.
    pub fn new(queue: impl Into<String>, id: impl Into<String>) -> Self {
        ChildKey {
            queue: queue.into(),
            id: id.into(),
        }
    }

    /// From BullMQ's key for the job, `<prefix>:<queue>:<id>` (a prefix may hold `:`, a queue or an
    /// id never does).
    pub(crate) fn from_redis_key(key: &str) -> Self {
        let mut parts = key.rsplitn(3, ':');
        let id = parts.next().unwrap_or_default();
        let queue = parts.next().unwrap_or_default();
        ChildKey::new(queue, id)
    }
}

impl std::fmt::Display for ChildKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.queue, self.id)
    }
}

/// A flow child that failed for good: in [`ChildResults::failed`], one whose policy let
/// the parent run
/// ([`OnChildFailure::ContinueParent`](crate::OnChildFailure::ContinueParent) or
/// [`IgnoreDependency`](crate::OnChildFailure::IgnoreDependency)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FailedChild {
    /// The child.
    pub child: ChildKey,
    /// Its failure reason.
    pub reason: String,
}

impl FailedChild {
    pub(crate) fn new(child: ChildKey, reason: String) -> Self {
        FailedChild { child, reason }
    }
}

/// The children's results as BullMQ stores them on the parent: the JSON return value
/// of each completed child, and the reason of each failure the parent was allowed past.
#[derive(Debug, Clone, Default)]
pub(crate) struct RawChildren {
    pub(crate) completed: Vec<(String, serde_json::Value)>,
    pub(crate) failed: Vec<(String, String)>,
}

/// What a flow parent's children returned, each completed child's return value as an
/// `R`. A handler that takes it as its second argument is a flow parent:
///
/// ```
/// use queue_core::{ChildResults, Job, JobError};
///
/// #[derive(serde::Deserialize)]
/// struct Rendered { pages: u32 }
///
/// async fn notify(job: Job<String>, steps: ChildResults<Rendered>) -> Result<u32, JobError> {
///     if let Some(failed) = steps.failed().first() {
///         return Err(JobError::unrecoverable(std::io::Error::other(format!("{} failed: {}", failed.child, failed.reason))));
///     }
///     Ok(steps.values().map(|r| r.pages).sum())
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let job = Job::for_test("2026-11".to_owned())
///     .with_child_result("report-steps", "render-1", serde_json::json!({"pages": 3}))
///     .with_child_result("report-steps", "render-2", serde_json::json!({"pages": 4}));
/// let steps = job.child_results::<Rendered>().await.unwrap();
/// assert_eq!(notify(job, steps).await.unwrap(), 7);
/// # });
/// ```
///
/// Children that return different types can share an untagged `enum`, or be read as
/// `serde_json::Value`. A value that does not fit `R` fails the parent without retries,
/// naming the child.
#[derive(Debug, Clone)]
pub struct ChildResults<R> {
    completed: Vec<(ChildKey, R)>,
    failed: Vec<FailedChild>,
}

impl<R> Default for ChildResults<R> {
    fn default() -> Self {
        ChildResults {
            completed: Vec::new(),
            failed: Vec::new(),
        }
    }
}

impl<R: DeserializeOwned> ChildResults<R> {
    /// Types `raw`, ordered by child (queue, then id).
    pub(crate) fn from_raw(raw: RawChildren, keys: Option<&Keys>) -> Result<Self, JobError> {
        let mut completed = raw
            .completed
            .into_iter()
            .map(|(key, value)| {
                let child = ChildKey::from_redis_key(&key);
                let was_sealed = sealed_with(&value).is_some();
                let value =
                    open_in(keys, &child.queue, Field::ReturnValue, value).map_err(|e| {
                        JobError::unrecoverable_msg(format!(
                            "the return value of child {child}: {e}"
                        ))
                    })?;
                R::deserialize(&value)
                    .map(|r| (child.clone(), r))
                    .map_err(|e| {
                        // serde's words can quote the value: not of a sealed one, into
                        // a failure reason Redis keeps.
                        let why = match was_sealed {
                            true => "the detail is withheld, as the value is sealed".to_owned(),
                            false => e.to_string(),
                        };
                        JobError::unrecoverable_msg(format!(
                            "the return value of child {child} does not fit {}: {why}",
                            type_name::<R>()
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        completed.sort_by(|a, b| a.0.cmp(&b.0));
        let mut failed: Vec<FailedChild> = raw
            .failed
            .into_iter()
            .map(|(key, reason)| {
                let child = ChildKey::from_redis_key(&key);
                // Sealed when the child's queue seals failure reasons; one that does not
                // open is passed on as stored, with the child named.
                let reason = open_text_in(keys, &child.queue, Field::FailedReason, reason.clone())
                    .unwrap_or(reason);
                FailedChild::new(child, reason)
            })
            .collect();
        failed.sort_by(|a, b| a.child.cmp(&b.child));
        Ok(ChildResults { completed, failed })
    }
}

impl<R> ChildResults<R> {
    /// Each completed child with what it returned.
    pub fn iter(&self) -> impl Iterator<Item = (&ChildKey, &R)> {
        self.completed.iter().map(|(k, r)| (k, r))
    }

    /// What each completed child returned.
    pub fn values(&self) -> impl Iterator<Item = &R> {
        self.completed.iter().map(|(_, r)| r)
    }

    /// What job `id` of `queue` returned, if it is a completed child.
    pub fn get(&self, queue: &str, id: &str) -> Option<&R> {
        self.completed
            .iter()
            .find(|(k, _)| k.queue == queue && k.id == id)
            .map(|(_, r)| r)
    }

    /// How many children completed.
    pub fn len(&self) -> usize {
        self.completed.len()
    }

    /// Whether no child completed.
    pub fn is_empty(&self) -> bool {
        self.completed.is_empty()
    }

    /// Children that failed for good while their policy let this parent run.
    pub fn failed(&self) -> &[FailedChild] {
        &self.failed
    }

    /// The completed children and their values.
    pub fn into_inner(self) -> Vec<(ChildKey, R)> {
        self.completed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_keys_split_at_the_last_two_separators() {
        assert_eq!(
            ChildKey::from_redis_key("bull:steps:render-1"),
            ChildKey::new("steps", "render-1")
        );
        assert_eq!(
            ChildKey::from_redis_key("{app}:tenant:steps:render-1"),
            ChildKey::new("steps", "render-1")
        );
    }

    #[test]
    fn a_value_that_does_not_fit_names_the_child_and_is_not_retried() {
        let raw = RawChildren {
            completed: vec![("bull:steps:a".into(), serde_json::json!("text"))],
            failed: Vec::new(),
        };
        let err = ChildResults::<u32>::from_raw(raw, None).unwrap_err();
        assert!(!err.is_retryable());
        assert!(err.message().contains("child steps/a"), "{}", err.message());
        assert!(err.message().contains("u32"), "{}", err.message());
    }
}
