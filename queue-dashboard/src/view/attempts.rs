//! A job's attempts: how many were made of how many allowed, each failure's reason and
//! error chain (BullMQ's `stacktrace`, one entry per failed attempt, oldest first, the
//! first line the reason), when the next one runs, and how long the job waited and ran.
//! A sealed reason or record reads as sealed, with its key's id, unless it was opened
//! for the reader ([`crate::load::notes`]).

use maud::{html, Markup};
use queue_core::{JobInfo, JobState};

use super::format::{at, duration, Clip};
use super::{sealed, widgets};
use crate::load::payload::Shown;

/// The characters of one failure shown (reason and chain).
const FAILURE_SHOWN: usize = 16_000;

/// What the section needs beyond the job.
pub(crate) struct Attempts<'a> {
    /// The job, its reason and records taken out (in `reason` and `failures`).
    pub(crate) info: &'a JobInfo,
    /// The last failure's reason, when the page shows it (no record is kept).
    pub(crate) reason: Option<&'a Shown<String>>,
    /// Each failed attempt's record, oldest first.
    pub(crate) failures: &'a [Shown<String>],
    pub(crate) state: JobState,
    /// When a delayed job runs next (a retry's backoff or its delay).
    pub(crate) runs_at: Option<u64>,
    /// Where the Retry button posts, for an operator looking at a failed job.
    pub(crate) retry: Option<String>,
    pub(crate) now: u64,
}

impl Attempts<'_> {
    pub(crate) fn render(&self) -> Markup {
        let info = self.info;
        let failures = self.failures;
        // The job's times, as durations: how long it waited before its last attempt
        // started, and how long that attempt ran.
        let queued = info
            .processed_on_ms
            .map(|start| start.saturating_sub(info.timestamp_ms));
        let ran = info
            .finished_on_ms
            .zip(info.processed_on_ms)
            .map(|(end, start)| end.saturating_sub(start));
        let retrying = self.state == JobState::Delayed && info.attempts_made > 0;
        html! {
            section.attempts {
                h2 { "Attempts" }
                p {
                    (info.attempts_made) " made of " (info.max_attempts) " allowed"
                    @if info.attempts_started > info.attempts_made {
                        " (" (info.attempts_started - info.attempts_made) " started and not finished)"
                    }
                    @if let Some(retry) = &self.retry { " " (widgets::post_button(retry, "Retry", false)) }
                }
                dl {
                    dt { "added" } dd { (at(info.timestamp_ms, self.now)) }
                    @if let Some(start) = info.processed_on_ms {
                        dt { "last attempt started" } dd { (at(start, self.now)) }
                    }
                    @if let Some(end) = info.finished_on_ms {
                        dt { "finished" } dd { (at(end, self.now)) }
                    }
                    @if let Some(queued) = queued {
                        dt { "queued for" } dd { (duration(queued)) }
                    }
                    @if let Some(ran) = ran {
                        dt { "ran for" } dd { (duration(ran)) }
                    } @else if let (Some(start), JobState::Active) = (info.processed_on_ms, self.state) {
                        dt { "running for" } dd { (duration(self.now.saturating_sub(start))) }
                    }
                    @if let Some(runs_at) = self.runs_at {
                        dt { @if retrying { "next attempt" } @else { "runs" } }
                        dd.next-run {
                            (at(runs_at, self.now))
                            @if retrying { " " span.muted { "(attempt " (info.attempts_made + 1) " of " (info.max_attempts) ")" } }
                        }
                    }
                }
                @if failures.is_empty() {
                    @if let Some(reason) = self.reason {
                        h3 { "Last failure" }
                        (sealed::notice(reason))
                        @if let Some(reason) = sealed::readable(reason) {
                            pre.bad { (Clip(reason, FAILURE_SHOWN)) }
                        }
                    }
                } @else {
                    h3 { "Failures, oldest first" }
                    @if (failures.len() as u32) < info.attempts_made && self.state == JobState::Failed {
                        p.muted { "The oldest ones are no longer kept." }
                    }
                    ol.attempts {
                        @for failure in failures {
                            li {
                                @if let Some(failure) = sealed::readable(failure) {
                                    @let (reason, chain) = failure.split_once('\n').unwrap_or((failure.as_str(), ""));
                                    strong.bad { (Clip(reason, FAILURE_SHOWN)) }
                                    @if !chain.trim().is_empty() {
                                        pre { (Clip(chain, FAILURE_SHOWN)) }
                                    }
                                }
                                (sealed::notice(failure))
                            }
                        }
                    }
                }
            }
        }
    }
}
