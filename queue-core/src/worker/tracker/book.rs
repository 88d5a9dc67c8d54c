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
        let facts = self
            .running
            .iter()
            .filter(|(_, f)| f.job.id == job_id)
            .max_by_key(|(seq, _)| **seq)
            .map(|(_, f)| f)
            .or_else(|| self.awaiting.get(job_id)?.back().map(|a| &a.facts))?;
        Some((facts.job.name.clone(), facts.data.clone()))
    }

    /// The facts for `job_id`'s report: of a failure with this `reason` if one waits,
    /// else of the oldest attempt of the kind reported, else of the oldest.
    pub(super) fn take_report(&mut self, job_id: &str, reason: Option<&str>) -> Option<Awaiting> {
        let waiting = self.awaiting.get_mut(job_id)?;
        let kind_matches = |a: &Awaiting| a.failure.is_some() == reason.is_some();
        let position = waiting
            .iter()
            .position(|a| kind_matches(a) && a.failure.as_ref().map(|(r, _)| r.as_str()) == reason)
            .or_else(|| waiting.iter().position(kind_matches))
            .unwrap_or(0);
        let taken = waiting.remove(position);
        if waiting.is_empty() {
            self.awaiting.remove(job_id);
        }
        if taken.is_some() {
            self.awaiting_count -= 1;
        }
        taken
    }

    /// Lets go of the facts whose report will not come, at most once a [`SWEEP_EVERY`];
    /// past [`MAX_AWAITING`], of the older half at once (so that a flood of lost
    /// reports costs a sweep per thousands of attempts, not one per attempt).
    pub(super) fn sweep(&mut self, now: Instant) {
        let over = self.awaiting_count > MAX_AWAITING;
        if !over && now.duration_since(self.swept) < SWEEP_EVERY {
            return;
        }
        self.swept = now;
        let drop_seen = self.drop_seen;
        let cutoff = if over {
            let mut ended: Vec<Instant> = self
                .awaiting
                .values()
                .flat_map(|waiting| waiting.iter().map(|a| a.ended))
                .collect();
            let keep = MAX_AWAITING / 2;
            let cut = ended.len().saturating_sub(keep);
            ended.select_nth_unstable(cut);
            Some(ended[cut])
        } else {
            None
        };
        let stale = |a: &Awaiting| {
            let waited = now.duration_since(a.ended);
            waited >= REPORT_WITHIN
                || cutoff.is_some_and(|cutoff| a.ended < cutoff)
                || drop_seen.is_some_and(|seen| a.ended <= seen && waited >= AFTER_A_DROP)
        };
        let mut kept = 0;
        self.awaiting.retain(|_, waiting| {
            waiting.retain(|a| !stale(a));
            kept += waiting.len();
            !waiting.is_empty()
        });
        self.awaiting_count = kept;
    }
}
