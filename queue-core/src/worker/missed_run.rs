//! A scheduled run that started too late for its scheduler's [`MissedRuns::Skip`]
//! policy.
//!
//! [`MissedRuns::Skip`]: crate::options::MissedRuns::Skip

use std::time::Duration;

use crate::job::Job;

/// How late the run `job` is, when its scheduler skips runs this late: a scheduler's
/// run (BullMQ names it `repeat:<scheduler>:<millis of its time>`), on its first start,
/// started more than its grace after its time. A run started before (a retry, a run
/// recovered after its worker stalled or died) has begun its work, and finishes it.
pub(super) fn too_late(job: &Job<serde_json::Value>, now_ms: u64) -> Option<Duration> {
    let grace = job.options().skip_late?;
    if job.attempt() > 1 || job.meta().attempts_started > 1 {
        return None;
    }
    let due = scheduled_at(job.id())?;
    let late = Duration::from_millis(now_ms.checked_sub(due)?);
    (late > grace).then_some(late)
}

/// The time in a scheduler's job id, `repeat:<scheduler id>:<millis>`.
fn scheduled_at(job_id: &str) -> Option<u64> {
    let rest = job_id.strip_prefix("repeat:")?;
    let (_, millis) = rest.rsplit_once(':')?;
    millis.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::scheduled_at;

    #[test]
    fn a_schedulers_job_id_gives_its_time() {
        assert_eq!(
            scheduled_at("repeat:birthday-daily:1765065900000"),
            Some(1_765_065_900_000)
        );
        assert_eq!(scheduled_at("welcome-42"), None);
        assert_eq!(scheduled_at("repeat:no-time"), None);
    }
}
