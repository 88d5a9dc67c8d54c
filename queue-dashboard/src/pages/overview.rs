//! `/`: Redis's health, then every queue: counts per state, the age of its oldest
//! waiting job, workers, limits, schedulers, the last hour's throughput per minute, and
//! whether it has groups. Redis: one `INFO`, then per queue a fixed handful of commands
//! (whether it has groups: a page of one group).

use std::sync::Arc;

use axum::extract::State;
use axum::response::IntoResponse;
use axum::Extension;
use maud::{html, Markup};
use queue_core::{
    health::RedisInfo, job::JobCounts, queue::GlobalLimits, queue::PerMinuteSeries, JobState,
};

use super::LISTED;
use crate::view::format::{self, bytes, duration, Clip};
use crate::view::{self, widgets};
use crate::{Access, Base, PageResult, Shared};

/// The minutes of BullMQ's per-minute figures the overview draws.
const MINUTES: usize = 60;

/// What the overview shows of one queue.
struct Row {
    name: String,
    counts: JobCounts,
    paused: bool,
    workers: usize,
    limits: GlobalLimits,
    schedulers: u64,
    completed: Vec<u64>,
    failed: Vec<u64>,
    oldest_waiting: Option<u64>,
    /// Whether the queue has groups ([`Queue::groups`](queue_core::Queue::groups) lists
    /// one).
    grouped: bool,
}

pub(crate) async fn page(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
) -> PageResult {
    let mut rows = Vec::new();
    for name in shared.app.known_queues() {
        // Known by construction: `Shared::queue`'s check would list them all again.
        let queue = shared.app.queue::<serde_json::Value>(&name)?;
        let (
            counts,
            paused,
            workers,
            limits,
            schedulers,
            completed,
            failed,
            oldest_waiting,
            groups,
        ) = tokio::try_join!(
            queue.get_job_counts(),
            queue.is_paused(),
            queue.get_workers(),
            queue.get_global_limits(),
            queue.scheduler_count(),
            queue.get_per_minute(PerMinuteSeries::Completed, MINUTES),
            queue.get_per_minute(PerMinuteSeries::Failed, MINUTES),
            queue.get_oldest_waiting(),
            queue.groups(None, 1),
        )?;
        rows.push(Row {
            name,
            counts,
            paused,
            workers: workers.len(),
            limits,
            schedulers,
            completed,
            failed,
            oldest_waiting,
            grouped: !groups.groups.is_empty(),
        });
    }
    // A provider that hides `INFO` leaves the health line empty, not the page.
    let redis = shared.app.redis_info().await.ok();
    let now = format::now_ms();
    let body = html! {
        h1 { "Queues" }
        @if let Some(redis) = &redis { (health(redis)) }
        table {
            thead {
                tr {
                    th { "queue" }
                    @for state in LISTED { th.n { (state.as_str()) } }
                    th.n { "oldest waiting" }
                    th.n { "workers" }
                    th { "global limit" }
                    th.n { "schedulers" }
                    th { "completed / failed per minute, last hour" }
                }
            }
            tbody {
                @for row in &rows { (queue_row(&base, row, now)) }
            }
        }
    };
    Ok(view::page(&base, "Queues", access.who(), body).into_response())
}

fn health(redis: &RedisInfo) -> Markup {
    let memory = match (redis.used_memory, redis.maxmemory) {
        (Some(used), Some(max)) if max > 0 => {
            format!("{} of {} ({}%)", bytes(used), bytes(max), used * 100 / max)
        }
        (Some(used), _) => format!("{} (no limit)", bytes(used)),
        _ => "—".to_owned(),
    };
    let policy = redis.maxmemory_policy.as_deref().unwrap_or("—");
    let number = |n: Option<u64>| n.map_or_else(|| "—".to_owned(), |n| n.to_string());
    html! {
        section.health aria-label="Redis" {
            div { span.muted { "Redis" } b { (redis.version.as_deref().unwrap_or("—")) } }
            div { span.muted { "memory" } b { (memory) } }
            div {
                span.muted { "eviction policy" }
                // Any other policy may delete jobs when memory runs out.
                b.warn[policy != "noeviction"] { (policy) }
            }
            div { span.muted { "clients" } b { (number(redis.connected_clients)) } }
            div { span.muted { "ops/s" } b { (number(redis.ops_per_sec)) } }
            @if let Some(up) = redis.uptime_seconds {
                div { span.muted { "up" } b { (duration(up.saturating_mul(1000))) } }
            }
        }
    }
}

fn queue_row(base: &Base, row: &Row, now: u64) -> Markup {
    let link = base.queue(&row.name);
    let limit = match (row.limits.concurrency, row.limits.rate_limit) {
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
    html! {
        tr {
            td {
                a href=(link) { (Clip(&row.name, format::LISTED)) }
                @if row.paused { " " span.chip.bad { "paused" } }
                @if row.grouped { " " a.chip href=(base.groups(&row.name)) { "grouped" } }
            }
            @for state in LISTED {
                @let n = row.counts.of(state);
                td.n {
                    @if n > 0 && state == JobState::Failed { span.bad { (n) } } @else { (n) }
                }
            }
            td.n {
                @match row.oldest_waiting {
                    Some(at) => { (duration(now.saturating_sub(at))) },
                    None => span.muted { "—" },
                }
            }
            td.n { a href={ (base.workers()) "?queue=" (format::url_segment(&row.name)) } { (row.workers) } }
            td { (limit) }
            td.n { a href={ (link) "/schedulers" } { (row.schedulers) } }
            td {
                @if row.completed.is_empty() && row.failed.is_empty() {
                    span.muted { "not recorded (the worker's per_minute_metrics)" }
                } @else {
                    (widgets::sparkline(&row.completed, "good")) " " (widgets::sparkline(&row.failed, "bad"))
                }
            }
        }
    }
}
