//! The tracker's book: which report goes with which ended attempt, what a progress
//! report is about, and letting go of facts whose report will not come.

use std::sync::Arc;
use std::time::Instant;

use super::{Awaiting, Book, AFTER_A_DROP, MAX_AWAITING, REPORT_WITHIN, SWEEP_EVERY};

impl Book {
    /// The name and data of the attempt a progress report is about: the newest one
    /// running, or one that has just ended (the report travels the engine's event
    /// channel, and can arrive after the worker saw the attempt end).
    pub(super) fn progress_facts(
        &self,
        job_id: &str,
    ) -> Option<(String, Option<Arc<serde_json::Value>>)> {
        let facts = self.running.newest(job_id).or_else(|| {
            self.awaiting
                .iter()
                .rev()
                .find(|a| a.facts.job.id == job_id)
                .map(|a| &a.facts)
        })?;
        Some((facts.job.name.clone(), facts.data.clone()))
    }

    /// The facts for `job_id`'s report: of a failure with this `reason` if one waits,
    /// else of the oldest attempt of the kind reported, else of the oldest.
    pub(super) fn take_report(&mut self, job_id: &str, reason: Option<&str>) -> Option<Awaiting> {
        let mut of_kind = None;
        let mut oldest = None;
        for (at, a) in self.awaiting.iter().enumerate() {
            if a.facts.job.id != job_id {
                continue;
            }
            oldest.get_or_insert(at);
            if a.failure.is_some() != reason.is_some() {
                continue;
            }
            if a.failure.as_ref().map(|(r, _)| r.as_str()) == reason {
                // The exact match: a completion, or a failure with this reason.
                of_kind = Some(at);
                break;
            }
            of_kind.get_or_insert(at);
        }
        self.awaiting.remove(of_kind.or(oldest)?)
    }

    /// Lets go of the facts whose report will not come, at most once a [`SWEEP_EVERY`];
    /// past [`MAX_AWAITING`], of the older half at once (so that a flood of lost
    /// reports costs a sweep per thousands of attempts, not one per attempt).
    pub(super) fn sweep(&mut self, now: Instant) {
        let over = self.awaiting.len() > MAX_AWAITING;
        if !over && now.duration_since(self.swept) < SWEEP_EVERY {
            return;
        }
        self.swept = now;
        if over {
            // The front is the older half: the attempts ended in this order.
            let cut = self.awaiting.len() - MAX_AWAITING / 2;
            self.awaiting.drain(..cut);
        }
        let drop_seen = self.drop_seen;
        self.awaiting.retain(|a| {
            let waited = now.duration_since(a.ended);
            waited < REPORT_WITHIN
                && !drop_seen.is_some_and(|seen| a.ended <= seen && waited >= AFTER_A_DROP)
        });
    }
}
