//! A job's page: state, attempts and their failures, times, progress, options, its
//! flow, logs, and its payload and return value where the policy allows (a sealed one,
//! payload or failure or log line, shown as sealed, with its key's id, unless the
//! policy reveals it).

use axum::response::Html;
use maud::{html, Markup};
use queue_axum::access::Access;
use queue_core::{JobInfo, JobState};

use super::attempts::Attempts;
use super::format::{self, Clip};
use super::sealed;
use super::widgets::{self, unavailable_notice};
use crate::base::Base;
use crate::load::job::JobPage;
use crate::load::payload::Shown;
use crate::text::clip;

/// The characters of one log line shown.
const LOG_LINE_SHOWN: usize = 2_000;
/// The characters of a payload or return value shown.
const VALUE_SHOWN: usize = 256 * 1024;

/// Job `job` of queue `queue`, as `access` may see it.
pub(crate) fn page(base: &Base, access: &Access, queue: &str, job: &JobPage) -> Html<String> {
    let (info, state) = (&job.info, job.state);
    let here = base.job(queue, &info.id);
    let action = |a: &str| format!("{here}/{a}");
    let attempts = Attempts {
        info,
        reason: job.notes.failed_reason.as_ref(),
        failures: &job.notes.failures,
        state,
        runs_at: info.runs_at_ms,
        retry: (access.can_act() && state == JobState::Failed).then(|| action("retry")),
        now: format::now_ms(),
    };
    let body = html! {
        div data-live={ (base.queue(queue)) "/live" } data-job=(info.id) {
            (unavailable_notice())
            p.notice.live-note data-changed hidden {
                "This job has moved on: " a href="" { "read it again" } "."
            }
            h1 { (Clip(&info.id, 200)) " " (widgets::state_chip(state)) }
            @if access.can_act() {
                div.actions {
                    @if state == JobState::Delayed {
                        (widgets::post_button(&action("promote"), "Promote", false))
                    }
                    @if state != JobState::Active {
                        (widgets::confirm_link(&action("remove"), "Remove"))
                    }
                }
            }
            (details(queue, info, base))
            (attempts.render())
            @if access.sees_payloads() {
                h2 { "Payload" }
                (value(&job.values.data))
                @if let Some(shown) = &job.values.return_value {
                    h2 { "Return value" }
                    (value(shown))
                }
            } @else {
                p.muted { "The payload and return value are hidden by the access policy." }
            }
            @if let Some(flow) = &job.flow { (super::flow::render(flow, base, queue, &info.id)) }
            h2 { "Logs (" (job.notes.log_total) ")" }
            @if job.notes.logs.is_empty() {
                p.muted { "None." }
            } @else {
                (logs(&job.notes.logs))
            }
        }
    };
    super::page(base, &info.id, access.who(), body)
}

/// A payload or return value: as stored, or opened; a sealed one that stays closed says
/// so with its key's id (the envelope's base64 is nobody's payload).
fn value(shown: &Shown) -> Markup {
    html! {
        (sealed::notice(shown))
        @if let Some(value) = sealed::readable(shown) {
            pre { (Clip(&pretty(value), VALUE_SHOWN)) }
        }
    }
}

/// The log lines read: as stored, or opened (said once, above them); a sealed one that
/// stays closed as sealed, with its key's id, in its place.
fn logs(lines: &[Shown<String>]) -> Markup {
    let opened = lines
        .iter()
        .any(|line| matches!(line, Shown::Opened { .. }));
    html! {
        @if opened {
            p.sealed.muted { "Sealed lines opened for you; this reading is audited." }
        }
        pre {
            @for line in lines {
                @match line {
                    Shown::Opened { value, .. } => (Clip(value, LOG_LINE_SHOWN)),
                    other => (sealed::inline(other, LOG_LINE_SHOWN)),
                }
                "\n"
            }
        }
    }
}

fn details(queue: &str, info: &JobInfo, base: &Base) -> Markup {
    html! {
        dl {
            dt { "queue" } dd { a href=(base.queue(queue)) { (Clip(queue, 200)) } }
            dt { "name" } dd { (Clip(&info.name, 2_000)) }
            dt { "priority" } dd { (info.priority) }
            dt { "progress" } dd { (Clip(&info.progress.to_string(), 2_000)) }
            dt { "trace id" }
            dd {
                @match info.options.get_trace() {
                    Some(trace) => code { (trace.trace_id()) },
                    None => "—",
                }
            }
            dt { "parent" }
            dd {
                @match &info.parent {
                    Some(parent) => a href=(base.job(parent.queue(), &parent.id)) {
                        (Clip(&parent.id, 200)) " in " (Clip(parent.queue(), 200))
                    },
                    None => "—",
                }
            }
            dt { "options" } dd { (options_summary(&info.options)) }
        }
    }
}

/// The options a person reads a job by: attempts, backoff, delay, priority, timeout.
fn options_summary(options: &queue_core::JobOptions) -> String {
    let mut parts = Vec::new();
    if let Some(attempts) = options.get_attempts() {
        parts.push(format!("attempts {attempts}"));
    }
    match options.get_backoff() {
        Some(queue_core::Backoff::Fixed(d)) => parts.push(format!(
            "fixed backoff {}",
            format::duration(format::millis(d))
        )),
        Some(queue_core::Backoff::Exponential(d)) => parts.push(format!(
            "exponential backoff from {}",
            format::duration(format::millis(d))
        )),
        Some(queue_core::Backoff::Custom(name)) => {
            parts.push(format!("backoff `{}`", clip(name, 100)))
        }
        _ => {}
    }
    if let Some(delay) = options.get_delay() {
        parts.push(format!(
            "delay {}",
            format::duration(format::millis(&delay))
        ));
    }
    if let Some(priority) = options.get_priority() {
        parts.push(format!("priority {priority}"));
    }
    if let Some(timeout) = options.get_timeout() {
        parts.push(format!(
            "timeout {}",
            format::duration(format::millis(&timeout))
        ));
    }
    if parts.is_empty() {
        "defaults".to_owned()
    } else {
        parts.join(", ")
    }
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}
