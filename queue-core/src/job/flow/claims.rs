//! The jobs of a flow whose ids the caller chose (only those can exist already), and
//! what an existing one means for the flow: taken in, or the flow refused.

use std::collections::HashMap;

use super::PreparedJob;
use crate::error::flow::{ExistingJobConflict, FlowError};
use crate::job::JobState;

/// A job of a flow with a job id of the caller's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim<'a> {
    /// Its place in the tree (`root`, `root.1.0`), for errors.
    pub(crate) path: String,
    pub(crate) queue: &'a str,
    pub(crate) id: &'a str,
    pub(crate) is_root: bool,
    pub(crate) has_children: bool,
}

/// A job found under a claimed id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) state: JobState,
    /// The parent that waits for it, if that parent still exists, as `queue/id`.
    pub(crate) live_parent: Option<String>,
}

/// The jobs of `root`'s tree that carry a job id, depth first, the root first if it
/// does; refused when two of them name the same job.
pub(crate) fn claims(root: &PreparedJob) -> Result<Vec<Claim<'_>>, FlowError> {
    let mut found = Vec::new();
    collect(root, "root".to_owned(), true, &mut found);
    let mut seen: HashMap<(&str, &str), &str> = HashMap::new();
    for claim in &found {
        if let Some(first) = seen.insert((claim.queue, claim.id), &claim.path) {
            return Err(FlowError::RepeatedId {
                first: first.to_owned(),
                second: claim.path.clone(),
                queue: claim.queue.to_owned(),
                id: claim.id.to_owned(),
            });
        }
    }
    Ok(found)
}

fn collect<'a>(job: &'a PreparedJob, path: String, is_root: bool, into: &mut Vec<Claim<'a>>) {
    if let Some(id) = job.options.job_id.as_deref() {
        into.push(Claim {
            path: path.clone(),
            queue: &job.queue,
            id,
            is_root,
            has_children: !job.children.is_empty(),
        });
    }
    for (i, child) in job.children.iter().enumerate() {
        collect(child, format!("{path}.{i}"), false, into);
    }
}

/// Whether the existing job `found` under a child's claimed id can be taken into the
/// flow (BullMQ then makes it the child of its new parent: a completed one gives the
/// parent its value, a pending one is waited for), and the state to answer it with.
/// Refused: one that failed (the parent would wait for ever), one another parent waits
/// for, one the flow would give children (BullMQ would hang them under a job that does
/// not wait for them).
pub(crate) fn judge(claim: &Claim<'_>, found: &Found) -> Result<JobState, FlowError> {
    let refuse = |reason| FlowError::ExistingJob {
        path: claim.path.clone(),
        queue: claim.queue.to_owned(),
        id: claim.id.to_owned(),
        reason,
    };
    if claim.has_children {
        return Err(refuse(ExistingJobConflict::GivenChildren));
    }
    if let Some(parent) = &found.live_parent {
        return Err(refuse(ExistingJobConflict::OtherParent {
            parent: parent.clone(),
        }));
    }
    match found.state {
        JobState::Failed => Err(refuse(ExistingJobConflict::Failed)),
        state => Ok(state),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::JobOptions;

    fn job(queue: &str, id: Option<&str>, children: Vec<PreparedJob>) -> PreparedJob {
        let options = match id {
            Some(id) => JobOptions::new().job_id(id),
            None => JobOptions::new(),
        };
        PreparedJob {
            queue: queue.to_owned(),
            name: "n".to_owned(),
            data: serde_json::Value::Null,
            options,
            on_failure: None,
            children,
        }
    }

    #[test]
    fn only_jobs_with_ids_are_claims_named_by_their_place() {
        let tree = job(
            "p",
            Some("r"),
            vec![
                job("s", None, vec![job("s", Some("deep"), vec![])]),
                job("s", Some("b"), vec![]),
            ],
        );
        let found: Vec<(String, &str, bool, bool)> = claims(&tree)
            .unwrap()
            .into_iter()
            .map(|c| (c.path, c.id, c.is_root, c.has_children))
            .collect();
        assert_eq!(
            found,
            [
                ("root".to_owned(), "r", true, true),
                ("root.0.0".to_owned(), "deep", false, false),
                ("root.1".to_owned(), "b", false, false),
            ]
        );
    }

    #[test]
    fn one_id_twice_in_a_queue_is_refused_in_another_queue_it_is_not() {
        let twice = job(
            "p",
            None,
            vec![job("s", Some("x"), vec![]), job("s", Some("x"), vec![])],
        );
        let err = claims(&twice).unwrap_err();
        assert!(
            matches!(&err, FlowError::RepeatedId { first, second, .. } if first == "root.0" && second == "root.1"),
            "{err}"
        );
        let apart = job(
            "p",
            None,
            vec![job("s", Some("x"), vec![]), job("t", Some("x"), vec![])],
        );
        assert_eq!(claims(&apart).unwrap().len(), 2);
    }

    #[test]
    fn an_existing_child_is_taken_in_only_when_it_can_still_end_for_its_new_parent() {
        let leaf = Claim {
            path: "root.1".to_owned(),
            queue: "s",
            id: "x",
            is_root: false,
            has_children: false,
        };
        let found = |state, live_parent: Option<&str>| Found {
            state,
            live_parent: live_parent.map(str::to_owned),
        };
        for state in [
            JobState::Completed,
            JobState::Waiting,
            JobState::Delayed,
            JobState::Active,
            JobState::Prioritized,
            JobState::WaitingChildren,
        ] {
            assert_eq!(judge(&leaf, &found(state, None)), Ok(state));
        }
        let reason = |r: Result<JobState, FlowError>| match r {
            Err(FlowError::ExistingJob { reason, .. }) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            reason(judge(&leaf, &found(JobState::Failed, None))),
            ExistingJobConflict::Failed
        );
        assert_eq!(
            reason(judge(&leaf, &found(JobState::Waiting, Some("p/other")))),
            ExistingJobConflict::OtherParent {
                parent: "p/other".to_owned()
            }
        );
        let middle = Claim {
            has_children: true,
            ..leaf
        };
        assert_eq!(
            reason(judge(&middle, &found(JobState::Completed, None))),
            ExistingJobConflict::GivenChildren
        );
    }
}
