//! The pages: the overview of every queue, one queue's jobs in a state, and one job.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect};
use axum::Extension;
use queue_core::{JobCounts, JobInfo, JobState, Outcome};
use serde::Deserialize;

use super::html::{self, action_button, esc, url_segment};
use super::{job_id, Access, Base, PageResult, Problem, Shared, PAGE_SIZE};
use crate::quote;

/// Shown by the page's script while the live stream says Redis is unavailable.
const UNAVAILABLE_NOTICE: &str =
    "<p class=\"notice\" data-unavailable hidden>Redis is unavailable: \
     this page is not live until it is back.</p>";

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

/// The minutes of BullMQ's per-minute figures the overview draws.
const OVERVIEW_MINUTES: usize = 60;

pub(super) async fn overview(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
) -> PageResult {
    let mut rows = String::new();
    for name in shared.app.known_queues() {
        // Known by construction: `Shared::queue`'s check would list them all again.
        let queue = shared.app.queue::<serde_json::Value>(&name)?;
        let (counts, paused, workers, limits, schedulers, completed, failed) = tokio::try_join!(
            queue.get_job_counts(),
            queue.is_paused(),
            queue.get_workers(),
            queue.get_global_limits(),
            queue.scheduler_count(),
            queue.get_per_minute(Outcome::Completed, OVERVIEW_MINUTES),
            queue.get_per_minute(Outcome::Failed, OVERVIEW_MINUTES),
        )?;
        let link = base.queue_page(&name);
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
            let n = counts.of(state);
            let cell = if n > 0 && state == JobState::Failed {
                format!("<span class=\"bad\">{n}</span>")
            } else {
                n.to_string()
            };
            rows.push_str(&format!("<td class=\"n\">{cell}</td>"));
        }
        let limit = match (limits.concurrency, limits.rate_limit) {
            (None, None) => "—".to_owned(),
            (c, r) => [
                c.map(|c| format!("{c} at once")),
                r.map(|(max, per)| format!("{max} per {} ms", per.as_millis())),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", "),
        };
        let minutes = if completed.is_empty() && failed.is_empty() {
            "<span class=\"muted\">not recorded</span>".to_owned()
        } else {
            format!(
                "{} {}",
                html::sparkline(&completed, "good"),
                html::sparkline(&failed, "bad")
            )
        };
        rows.push_str(&format!(
            "<td class=\"n\"><a href=\"{}/workers\">{}</a></td><td>{}</td><td class=\"n\"><a href=\"{}/schedulers\">{schedulers}</a></td><td>{minutes}</td></tr>",
            esc(&link),
            workers.len(),
            esc(&limit),
            esc(&link),
        ));
    }
    let mut head = String::from("<tr><th>queue</th>");
    for state in LISTED {
        head.push_str(&format!("<th class=\"n\">{}</th>", state.as_str()));
    }
    head.push_str("<th class=\"n\">workers</th><th>global limit</th><th class=\"n\">schedulers</th><th>completed / failed per minute, last hour</th></tr>");
    let body = format!("<h1>Queues</h1><table><thead>{head}</thead><tbody>{rows}</tbody></table>");
    Ok(html::page(base.as_str(), "Queues", access.who(), &body).into_response())
}

/// A queue page's query: `state`, `page` (from 1), `order` (`newest` or `oldest`),
/// `name` (only jobs of that name), and `id` to look a job up.
#[derive(Debug, Deserialize)]
pub(super) struct QueueQuery {
    state: Option<String>,
    page: Option<String>,
    order: Option<String>,
    name: Option<String>,
    id: Option<String>,
}

/// How many jobs of a state a name filter looks through: BullMQ keeps no index by name,
/// so a filtered page is found by reading the state's jobs in order, up to this many.
pub(super) const NAME_SCAN: usize = 5_000;

/// What a queue page lists, checked.
struct Listing {
    state: JobState,
    page: usize,
    oldest_first: bool,
    name: Option<String>,
}

impl Listing {
    fn of(query: &QueueQuery) -> Result<Listing, Problem> {
        let state = match query.state.as_deref() {
            None => JobState::Waiting,
            Some(s) => match s.parse::<JobState>() {
                Ok(state) if LISTED.contains(&state) => state,
                _ => {
                    return Err(Problem::BadRequest(format!(
                        "{} is not a state a queue lists; use one of: waiting, prioritized, \
                         delayed, active, waiting-children, completed, failed.",
                        quote(s)
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
        let oldest_first = match query.order.as_deref() {
            None | Some("newest") => false,
            Some("oldest") => true,
            Some(other) => {
                return Err(Problem::BadRequest(format!(
                    "{} is not an order; use newest or oldest.",
                    quote(other)
                )))
            }
        };
        let name = query
            .name
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned);
        Ok(Listing {
            state,
            page,
            oldest_first,
            name,
        })
    }

    /// The query string of this listing at `page` (escaped for an attribute).
    fn link(&self, here: &str, page: usize) -> String {
        let mut link = format!("{here}?state={}&page={page}", self.state.as_str());
        if self.oldest_first {
            link.push_str("&order=oldest");
        }
        if let Some(name) = &self.name {
            link.push_str("&name=");
            link.push_str(&url_segment(name));
        }
        esc(&link)
    }

    async fn read(
        &self,
        queue: &queue_core::Queue<serde_json::Value>,
        range: std::ops::Range<usize>,
    ) -> Result<Vec<JobInfo>, queue_core::Error> {
        let states = [self.state];
        if self.oldest_first {
            queue.get_jobs_oldest_first(&states, range).await
        } else {
            queue.get_jobs(&states, range).await
        }
    }

    /// This page's jobs, and whether more follow.
    async fn fetch(
        &self,
        queue: &queue_core::Queue<serde_json::Value>,
    ) -> Result<(Vec<JobInfo>, bool), queue_core::Error> {
        let skip = (self.page - 1) * PAGE_SIZE;
        let Some(name) = &self.name else {
            let jobs = self.read(queue, skip..skip + PAGE_SIZE + 1).await?;
            let more = jobs.len() > PAGE_SIZE;
            return Ok((jobs.into_iter().take(PAGE_SIZE).collect(), more));
        };
        // Read in chunks, keep the matches of this page, stop at the scan's bound.
        const CHUNK: usize = 500;
        let (mut matched, mut page) = (0, Vec::with_capacity(PAGE_SIZE));
        let mut offset = 0;
        while offset < NAME_SCAN {
            let chunk = self.read(queue, offset..offset + CHUNK).await?;
            let last = chunk.len() < CHUNK;
            for job in chunk.into_iter().filter(|job| &job.name == name) {
                if matched >= skip + PAGE_SIZE {
                    return Ok((page, true));
                }
                if matched >= skip {
                    page.push(job);
                }
                matched += 1;
            }
            if last {
                break;
            }
            offset += CHUNK;
        }
        Ok((page, false))
    }
}

pub(super) async fn queue(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
    Query(query): Query<QueueQuery>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let here = base.queue_page(&name);
    if let Some(id) = query
        .id
        .as_deref()
        .map(str::trim)
        .filter(|id| !id.is_empty())
    {
        return Ok(Redirect::to(&format!("{here}/jobs/{}", url_segment(id))).into_response());
    }
    let listing = Listing::of(&query)?;
    let (counts, paused, (jobs, more)) = tokio::try_join!(
        queue.get_job_counts(),
        queue.is_paused(),
        listing.fetch(&queue),
    )?;

    let mut body = format!("<h1>{}", esc(&name));
    if paused {
        body.push_str(" <span class=\"chip bad\">paused</span>");
    }
    body.push_str("</h1>");
    body.push_str(&format!(
        "<nav class=\"sub\"><a href=\"{h}/schedulers\">schedulers</a><a href=\"{h}/workers\">workers</a></nav>",
        h = esc(&here)
    ));
    if access.can_act() {
        body.push_str(&queue_actions(&here, paused, &counts));
    }
    body.push_str(&format!(
        "<form method=\"get\" action=\"{}\"><input name=\"id\" placeholder=\"job id\" aria-label=\"job id\"> <button>Find</button></form>",
        esc(&here)
    ));
    body.push_str("<nav class=\"tabs\">");
    for listed in LISTED {
        body.push_str(&format!(
            "<a href=\"{}?state={}\"{}>{} <span data-count=\"{}\">{}</span></a>",
            esc(&here),
            listed.as_str(),
            if listed == listing.state {
                " class=\"on\""
            } else {
                ""
            },
            listed.as_str(),
            listed.as_str(),
            counts.of(listed)
        ));
    }
    body.push_str("</nav>");
    body.push_str(&format!(
        "<form method=\"get\" action=\"{}\"><input type=\"hidden\" name=\"state\" value=\"{}\">\
         <input name=\"name\" placeholder=\"job name\" aria-label=\"job name\" value=\"{}\"> \
         <select name=\"order\" aria-label=\"order\"><option value=\"newest\"{}>newest first</option><option value=\"oldest\"{}>oldest first</option></select> \
         <button>Show</button></form>",
        esc(&here),
        listing.state.as_str(),
        esc(listing.name.as_deref().unwrap_or_default()),
        if listing.oldest_first { "" } else { " selected" },
        if listing.oldest_first { " selected" } else { "" },
    ));
    // What the page's script keeps live: the counts above, and this part refetched when
    // one of the queue's jobs moves.
    body.push_str(&format!(
        "<div data-live=\"{}/live\">{UNAVAILABLE_NOTICE}<div data-refresh>",
        esc(&here)
    ));
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
    let page = listing.page;
    body.push_str(&format!("<p class=\"muted\">page {page}"));
    if listing.name.is_none() {
        let total = usize::try_from(counts.of(listing.state)).unwrap_or(usize::MAX);
        body.push_str(&format!(" of {}", total.div_ceil(PAGE_SIZE).max(1)));
    } else {
        body.push_str(&format!(
            " (of the matches among the first {NAME_SCAN} jobs)"
        ));
    }
    let (back, forward) = if listing.oldest_first {
        ("older", "newer")
    } else {
        ("newer", "older")
    };
    if page > 1 {
        body.push_str(&format!(
            " · <a href=\"{}\">{back}</a>",
            listing.link(&here, page - 1)
        ));
    }
    if more {
        body.push_str(&format!(
            " · <a href=\"{}\">{forward}</a>",
            listing.link(&here, page + 1)
        ));
    }
    body.push_str("</p></div></div>");
    Ok(html::page(base.as_str(), &name, access.who(), &body).into_response())
}

/// The operator's buttons and forms for a whole queue.
fn queue_actions(here: &str, paused: bool, counts: &JobCounts) -> String {
    let action = |a: &str| format!("{here}/actions/{a}");
    let mut out = String::from("<div class=\"actions\">");
    out.push_str(&if paused {
        action_button(&action("resume"), "Resume", false)
    } else {
        action_button(&action("pause"), "Pause", true)
    });
    if counts.failed > 0 {
        out.push_str(&action_button(
            &action("retry-failed"),
            "Retry all failed",
            false,
        ));
    }
    if counts.delayed > 0 {
        out.push_str(&action_button(
            &action("promote-delayed"),
            "Promote all delayed",
            false,
        ));
    }
    out.push_str(&action_button(&action("drain"), "Drain waiting", true));
    out.push_str(&format!("<a href=\"{}/add\">Add a job</a>", esc(here)));
    out.push_str(&format!(
        "<form class=\"inline\" method=\"post\" action=\"{}\">\
         <select name=\"state\" aria-label=\"state to clean\"><option>completed</option><option>failed</option><option>delayed</option><option>waiting</option></select> \
         older than <input name=\"older_than_s\" value=\"3600\" size=\"6\" aria-label=\"seconds\"> s \
         <button class=\"danger\">Clean</button></form>",
        esc(&action("clean"))
    ));
    out.push_str("</div>");
    out
}

pub(super) async fn job(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, id)): Path<(String, String)>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let id = job_id(&name, &id)?;
    let read = tokio::try_join!(
        queue.get_job(id),
        queue.get_job_state(id),
        queue.get_job_logs(id, 0..100),
        queue.get_children(id, CHILDREN_SHOWN),
    );
    let (info, state, logs, children) = match read? {
        (Some(info), Some(state), logs, children) => (info, state, logs, children),
        _ => {
            return Err(Problem::NotFound(format!(
                "No job {} in queue {}.",
                quote(id),
                quote(&name)
            )))
        }
    };
    let here = base.job_page(&name, id);
    let mut body = format!(
        "<div data-live=\"{}/live\" data-job=\"{}\">{UNAVAILABLE_NOTICE}<div data-refresh>\
         <h1>{} <span class=\"chip\">{}</span></h1>",
        esc(&base.queue_page(&name)),
        esc(&info.id),
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
    body.push_str(&details(&name, &info, &base));
    if let Some(reason) = &info.failed_reason {
        body.push_str(&format!(
            "<h2>Failure</h2><pre class=\"bad\">{}</pre>",
            esc(reason)
        ));
    }
    if !info.stacktrace.is_empty() {
        body.push_str("<h2>Stack traces</h2>");
        for (attempt, trace) in info.stacktrace.iter().enumerate().rev() {
            body.push_str(&format!(
                "<p class=\"muted\">failure {}</p><pre>{}</pre>",
                attempt + 1,
                esc(trace)
            ));
        }
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
    body.push_str(&family_tree(
        &info,
        &name,
        &children,
        &base,
        access.sees_payloads(),
    ));
    body.push_str(&format!("<h2>Logs ({})</h2>", logs.total));
    if logs.lines.is_empty() {
        body.push_str("<p class=\"muted\">None.</p>");
    } else {
        body.push_str(&format!("<pre>{}</pre>", esc(&logs.lines.join("\n"))));
    }
    body.push_str("</div></div>");
    Ok(html::page(base.as_str(), &info.id, access.who(), &body).into_response())
}

fn details(queue: &str, info: &JobInfo, base: &Base) -> String {
    let optional_time = |ms: Option<u64>| ms.map_or_else(|| "—".to_owned(), html::time);
    let rows = [
        (
            "queue",
            format!(
                "<a href=\"{}\">{}</a>",
                esc(&base.queue_page(queue)),
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
        (
            "trace id",
            info.options.get_trace().map_or_else(
                || "—".to_owned(),
                |t| format!("<code>{}</code>", t.trace_id()),
            ),
        ),
        ("parent", parent_link(info, base)),
        ("options", options_summary(&info.options)),
    ];
    let mut out = String::from("<dl>");
    for (term, value) in rows {
        out.push_str(&format!("<dt>{term}</dt><dd>{value}</dd>"));
    }
    out.push_str("</dl>");
    out
}

/// Children listed on a job page, of each kind.
const CHILDREN_SHOWN: usize = 100;

/// The job in its flow: its parent above it, its children below, each linked (their own
/// pages show the next level).
fn family_tree(
    info: &JobInfo,
    queue: &str,
    children: &queue_core::Children,
    base: &Base,
    payloads: bool,
) -> String {
    if info.parent.is_none() && children.is_empty() {
        return String::new();
    }
    let link = |queue: &str, id: &str| {
        format!(
            "<a href=\"{}\">{}</a> <span class=\"muted\">in {}</span>",
            esc(&base.job_page(queue, id)),
            esc(id),
            esc(queue)
        )
    };
    let mut out = String::from("<h2>Flow</h2><ul class=\"tree\">");
    let mut close = "";
    if let Some(parent) = &info.parent {
        out.push_str(&format!("<li>{}<ul>", link(parent.queue(), &parent.id)));
        close = "</ul></li>";
    }
    out.push_str(&format!("<li><strong>{}</strong>", link(queue, &info.id)));
    if !children.is_empty() {
        out.push_str("<ul>");
        for child in &children.pending {
            out.push_str(&format!(
                "<li>{} <span class=\"chip\">pending</span></li>",
                link(&child.queue, &child.id)
            ));
        }
        for child in &children.processed {
            let value = match (&child.return_value, payloads) {
                (Some(value), true) => format!(" <code>{}</code>", esc(&value.to_string())),
                _ => String::new(),
            };
            out.push_str(&format!(
                "<li>{} <span class=\"chip good\">processed</span>{value}</li>",
                link(&child.queue, &child.id)
            ));
        }
        for failed in &children.failed {
            out.push_str(&format!(
                "<li>{} <span class=\"chip bad\">failed</span> <span class=\"muted\">{}</span></li>",
                link(&failed.child.queue, &failed.child.id),
                esc(&failed.reason)
            ));
        }
        let shown = children.pending.len() + children.processed.len() + children.failed.len();
        let total = children.pending_total + children.processed_total + children.failed_total;
        if (shown as u64) < total {
            out.push_str(&format!(
                "<li class=\"muted\">… {} more</li>",
                total - shown as u64
            ));
        }
        out.push_str("</ul>");
    }
    out.push_str("</li>");
    out.push_str(close);
    out.push_str("</ul>");
    out
}

/// The flow parent, linked to its page.
fn parent_link(info: &JobInfo, base: &Base) -> String {
    let Some(parent) = &info.parent else {
        return "—".to_owned();
    };
    format!(
        "<a href=\"{}\">{} in {}</a>",
        esc(&base.job_page(parent.queue(), &parent.id)),
        esc(&parent.id),
        esc(parent.queue())
    )
}

/// The options a person reads a job by: attempts, backoff, delay, priority, timeout.
fn options_summary(options: &queue_core::JobOptions) -> String {
    let mut parts = Vec::new();
    if let Some(attempts) = options.get_attempts() {
        parts.push(format!("attempts {attempts}"));
    }
    match options.get_backoff() {
        Some(queue_core::Backoff::Fixed(d)) => {
            parts.push(format!("fixed backoff {} ms", d.as_millis()))
        }
        Some(queue_core::Backoff::Exponential(d)) => {
            parts.push(format!("exponential backoff from {} ms", d.as_millis()))
        }
        Some(queue_core::Backoff::Custom(name)) => parts.push(format!("backoff `{}`", esc(name))),
        _ => {}
    }
    if let Some(delay) = options.get_delay() {
        parts.push(format!("delay {} ms", delay.as_millis()));
    }
    if let Some(priority) = options.get_priority() {
        parts.push(format!("priority {priority}"));
    }
    if let Some(timeout) = options.get_timeout() {
        parts.push(format!("timeout {} ms", timeout.as_millis()));
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

pub(super) async fn schedulers(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let here = base.queue_page(&name);
    let schedulers = queue.get_schedulers(0..1_000).await?;
    let mut body = sub_page_heading(&here, &name, "schedulers");
    if schedulers.is_empty() {
        body.push_str("<p class=\"muted\">No schedulers.</p>");
    } else {
        body.push_str("<table><thead><tr><th>id</th><th>job</th><th>when</th><th>time zone</th><th>next run</th><th class=\"n\">runs</th><th></th></tr></thead><tbody>");
        for s in &schedulers {
            let when = match (&s.pattern, s.every) {
                (Some(pattern), _) => format!("cron <code>{}</code>", esc(pattern)),
                (None, Some(every)) => format!("every {} ms", every.as_millis()),
                (None, None) => "—".to_owned(),
            };
            let actions = if access.can_act() {
                let action = |a: &str| format!("{here}/schedulers/{}/{a}", url_segment(&s.id));
                format!(
                    "{} {}",
                    action_button(&action("run"), "Run now", false),
                    action_button(&action("remove"), "Remove", true)
                )
            } else {
                String::new()
            };
            body.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{when}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{actions}</td></tr>",
                esc(&s.id),
                esc(&s.job_name),
                esc(s.tz.as_deref().unwrap_or("UTC")),
                s.next_run_ms.map_or_else(|| "—".to_owned(), html::time),
                s.iterations,
            ));
        }
        body.push_str("</tbody></table>");
    }
    Ok(html::page(
        base.as_str(),
        &format!("{name} schedulers"),
        access.who(),
        &body,
    )
    .into_response())
}

pub(super) async fn workers(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let here = base.queue_page(&name);
    let workers = queue.get_workers().await?;
    let mut body = sub_page_heading(&here, &name, "workers");
    if workers.is_empty() {
        body.push_str("<p class=\"muted\">No worker is connected (or this Redis does not list its clients).</p>");
    } else {
        body.push_str("<table><thead><tr><th>worker</th><th>connection</th><th>from</th><th class=\"n\">connected</th><th class=\"n\">idle</th></tr></thead><tbody>");
        for w in &workers {
            body.push_str(&format!(
                "<tr><td>{}</td><td class=\"muted\">{}</td><td>{}</td><td class=\"n\">{} s</td><td class=\"n\">{} s</td></tr>",
                esc(w.name.as_deref().unwrap_or("—")),
                esc(&w.connection),
                esc(&w.addr),
                w.age.as_secs(),
                w.idle.as_secs()
            ));
        }
        body.push_str("</tbody></table>");
    }
    Ok(html::page(
        base.as_str(),
        &format!("{name} workers"),
        access.who(),
        &body,
    )
    .into_response())
}

/// The heading of a queue's sub-page: the queue, linked, and what the page lists.
fn sub_page_heading(queue_page: &str, queue: &str, what: &str) -> String {
    format!(
        "<h1><a href=\"{}\">{}</a> · {what}</h1>",
        esc(queue_page),
        esc(queue)
    )
}
