//! The pages: the overview of every queue, one queue's jobs in a state, and one job.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect};
use axum::Extension;
use queue_core::{JobCounts, JobInfo, JobState};
use serde::Deserialize;

use super::html::{self, action_button, esc, url_segment};
use super::{Access, Base, PageResult, Problem, Shared, PAGE_SIZE};

/// The states a queue page lists, in the order of a job's life.
const LISTED: [JobState; 7] = [
    JobState::Waiting,
    JobState::Prioritized,
    JobState::Delayed,
    JobState::Active,
    JobState::WaitingChildren,
    JobState::Completed,
    JobState::Failed,
];

fn count_of(counts: &JobCounts, state: JobState) -> u64 {
    match state {
        JobState::Waiting => counts.waiting,
        JobState::Prioritized => counts.prioritized,
        JobState::Delayed => counts.delayed,
        JobState::Active => counts.active,
        JobState::WaitingChildren => counts.waiting_children,
        JobState::Completed => counts.completed,
        JobState::Failed => counts.failed,
        // Pending jobs are in the application's outbox, not in Redis.
        _ => 0,
    }
}

pub(super) async fn overview(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
) -> PageResult {
    let mut rows = String::new();
    for name in shared.app.known_queues() {
        let queue = shared.queue(&name)?;
        let (counts, paused) = tokio::try_join!(queue.get_job_counts(), queue.is_paused())?;
        let link = format!("{}/queues/{}", base.as_str(), url_segment(&name));
        rows.push_str(&format!(
            "<tr><td><a href=\"{}\">{}</a>{}</td>",
            esc(&link),
            esc(&name),
            if paused {
                " <span class=\"chip bad\">paused</span>"
            } else {
                ""
            }
        ));
        for state in LISTED {
            let n = count_of(&counts, state);
            let cell = if n > 0 && state == JobState::Failed {
                format!("<span class=\"bad\">{n}</span>")
            } else {
                n.to_string()
            };
            rows.push_str(&format!("<td class=\"n\">{cell}</td>"));
        }
        rows.push_str("</tr>");
    }
    let mut head = String::from("<tr><th>queue</th>");
    for state in LISTED {
        head.push_str(&format!("<th class=\"n\">{}</th>", state.as_str()));
    }
    head.push_str("</tr>");
    let body = format!("<h1>Queues</h1><table><thead>{head}</thead><tbody>{rows}</tbody></table>");
    Ok(html::page(base.as_str(), "Queues", access.who(), &body).into_response())
}

/// A queue page's query: `state`, `page` (from 1), and `id` to look a job up.
#[derive(Debug, Deserialize)]
pub(super) struct QueueQuery {
    state: Option<String>,
    page: Option<String>,
    id: Option<String>,
}

pub(super) async fn queue(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
    Query(query): Query<QueueQuery>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let here = format!("{}/queues/{}", base.as_str(), url_segment(&name));
    if let Some(id) = query
        .id
        .as_deref()
        .map(str::trim)
        .filter(|id| !id.is_empty())
    {
        return Ok(Redirect::to(&format!("{here}/jobs/{}", url_segment(id))).into_response());
    }
    let state = match query.state.as_deref() {
        None => JobState::Waiting,
        Some(s) => match s.parse::<JobState>() {
            Ok(state) if LISTED.contains(&state) => state,
            _ => {
                return Err(Problem::BadRequest(format!(
                    "`{s}` is not a state a queue lists; use one of: waiting, prioritized, \
                     delayed, active, waiting-children, completed, failed."
                )))
            }
        },
    };
    let page = match query.page.as_deref().map(str::parse::<usize>) {
        None => 1,
        Some(Ok(page)) if (1..=1_000_000).contains(&page) => page,
        Some(_) => {
            return Err(Problem::BadRequest(
                "`page` is a whole number from 1.".to_owned(),
            ))
        }
    };
    let start = (page - 1) * PAGE_SIZE;
    let states = [state];
    let read = tokio::try_join!(
        queue.get_job_counts(),
        queue.is_paused(),
        queue.get_jobs(&states, start..start + PAGE_SIZE),
    );
    let (counts, paused, jobs) = read?;

    let mut body = format!("<h1>{}", esc(&name));
    if paused {
        body.push_str(" <span class=\"chip bad\">paused</span>");
    }
    body.push_str("</h1>");
    if access.can_act() {
        body.push_str("<div class=\"actions\">");
        let action = |a: &str| format!("{here}/actions/{a}");
        body.push_str(&if paused {
            action_button(&action("resume"), "Resume", false)
        } else {
            action_button(&action("pause"), "Pause", true)
        });
        if counts.failed > 0 {
            body.push_str(&action_button(
                &action("retry-failed"),
                "Retry all failed",
                false,
            ));
        }
        if counts.delayed > 0 {
            body.push_str(&action_button(
                &action("promote-delayed"),
                "Promote all delayed",
                false,
            ));
        }
        body.push_str("</div>");
    }
    body.push_str(&format!(
        "<form method=\"get\" action=\"{}\"><input name=\"id\" placeholder=\"job id\" aria-label=\"job id\"> <button>Find</button></form>",
        esc(&here)
    ));
    body.push_str("<nav class=\"tabs\">");
    for listed in LISTED {
        body.push_str(&format!(
            "<a href=\"{}?state={}\"{}>{} {}</a>",
            esc(&here),
            listed.as_str(),
            if listed == state { " class=\"on\"" } else { "" },
            listed.as_str(),
            count_of(&counts, listed)
        ));
    }
    body.push_str("</nav>");
    if jobs.is_empty() {
        body.push_str("<p class=\"muted\">No jobs here.</p>");
    } else {
        body.push_str("<table><thead><tr><th>id</th><th>name</th><th>added</th><th class=\"n\">attempts</th><th>reason</th></tr></thead><tbody>");
        for job in &jobs {
            body.push_str(&format!(
                "<tr><td><a href=\"{}/jobs/{}\">{}</a></td><td>{}</td><td>{}</td><td class=\"n\">{}/{}</td><td class=\"bad\">{}</td></tr>",
                esc(&here),
                url_segment(&job.id),
                esc(&job.id),
                esc(&job.name),
                html::time(job.timestamp_ms),
                job.attempts_made,
                job.max_attempts,
                esc(job.failed_reason.as_deref().unwrap_or_default()),
            ));
        }
        body.push_str("</tbody></table>");
    }
    let total = count_of(&counts, state);
    let pages = usize::try_from(total)
        .unwrap_or(usize::MAX)
        .div_ceil(PAGE_SIZE)
        .max(1);
    body.push_str(&format!("<p class=\"muted\">page {page} of {pages}"));
    let link = |p: usize, label: &str| {
        format!(
            " · <a href=\"{}?state={}&amp;page={p}\">{label}</a>",
            esc(&here),
            state.as_str()
        )
    };
    if page > 1 {
        body.push_str(&link(page - 1, "newer"));
    }
    if page < pages {
        body.push_str(&link(page + 1, "older"));
    }
    body.push_str("</p>");
    Ok(html::page(base.as_str(), &name, access.who(), &body).into_response())
}

pub(super) async fn job(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, id)): Path<(String, String)>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let read = tokio::try_join!(
        queue.get_job(&id),
        queue.get_job_state(&id),
        queue.get_job_logs(&id, 0..100),
    );
    let (info, state, logs) = match read? {
        (Some(info), Some(state), logs) => (info, state, logs),
        _ => {
            return Err(Problem::NotFound(format!(
                "No job `{id}` in queue `{name}`."
            )))
        }
    };
    let here = format!(
        "{}/queues/{}/jobs/{}",
        base.as_str(),
        url_segment(&name),
        url_segment(&id)
    );
    let mut body = format!(
        "<h1>{} <span class=\"chip\">{}</span></h1>",
        esc(&info.id),
        state.as_str()
    );
    if access.can_act() {
        body.push_str("<div class=\"actions\">");
        let action = |a: &str| format!("{here}/{a}");
        if state == JobState::Failed {
            body.push_str(&action_button(&action("retry"), "Retry", false));
        }
        if state == JobState::Delayed {
            body.push_str(&action_button(&action("promote"), "Promote", false));
        }
        if state != JobState::Active {
            body.push_str(&action_button(&action("remove"), "Remove", true));
        }
        body.push_str("</div>");
    }
    body.push_str(&details(&name, &info, base.as_str()));
    if let Some(reason) = &info.failed_reason {
        body.push_str(&format!(
            "<h2>Failure</h2><pre class=\"bad\">{}</pre>",
            esc(reason)
        ));
    }
    if access.sees_payloads() {
        body.push_str(&format!(
            "<h2>Payload</h2><pre>{}</pre>",
            esc(&pretty(&info.data))
        ));
        if let Some(value) = &info.return_value {
            body.push_str(&format!(
                "<h2>Return value</h2><pre>{}</pre>",
                esc(&pretty(value))
            ));
        }
    } else {
        body.push_str(
            "<p class=\"muted\">The payload and return value are hidden by the access policy.</p>",
        );
    }
    body.push_str(&format!("<h2>Logs ({})</h2>", logs.total));
    if logs.lines.is_empty() {
        body.push_str("<p class=\"muted\">None.</p>");
    } else {
        body.push_str(&format!("<pre>{}</pre>", esc(&logs.lines.join("\n"))));
    }
    Ok(html::page(base.as_str(), &info.id, access.who(), &body).into_response())
}

fn details(queue: &str, info: &JobInfo, base: &str) -> String {
    let optional_time = |ms: Option<u64>| ms.map_or_else(|| "—".to_owned(), html::time);
    let rows = [
        (
            "queue",
            format!(
                "<a href=\"{}/queues/{}\">{}</a>",
                esc(base),
                url_segment(queue),
                esc(queue)
            ),
        ),
        ("name", esc(&info.name)),
        (
            "attempts",
            format!(
                "{} made, {} started, {} allowed",
                info.attempts_made, info.attempts_started, info.max_attempts
            ),
        ),
        ("added", html::time(info.timestamp_ms)),
        ("delay", format!("{} ms", info.delay.as_millis())),
        ("priority", info.priority.to_string()),
        ("started", optional_time(info.processed_on_ms)),
        ("finished", optional_time(info.finished_on_ms)),
        ("progress", esc(&info.progress.to_string())),
    ];
    let mut out = String::from("<dl>");
    for (term, value) in rows {
        out.push_str(&format!("<dt>{term}</dt><dd>{value}</dd>"));
    }
    out.push_str("</dl>");
    out
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}
