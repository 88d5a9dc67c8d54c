//! The overview: Redis's health, then every queue: counts per state, the age of its
//! oldest waiting job, workers, limits, schedulers, the last hour's throughput per
//! minute, and whether it has groups.

use axum::response::Html;
use maud::{html, Markup};
use queue_core::{health::RedisInfo, JobState};

use super::format::{self, bytes, duration, Clip};
use super::widgets;
use crate::base::Base;
use crate::limits::{LISTED_CHARS, LISTED_STATES};
use crate::load::overview::{Overview, QueueRow};
use crate::text::url_segment;

/// The overview page, for `who`.
pub(crate) fn page(base: &Base, who: &str, overview: &Overview) -> Html<String> {
    let now = format::now_ms();
    let body = html! {
        h1 { "Queues" }
        @if let Some(redis) = &overview.redis { (health(redis)) }
        table {
            thead {
                tr {
                    th { "queue" }
                    @for state in LISTED_STATES { th.n { (state.as_str()) } }
                    th.n { "oldest waiting" }
                    th.n { "workers" }
                    th { "global limit" }
                    th.n { "schedulers" }
                    th { "completed / failed per minute, last hour" }
                }
            }
            tbody {
                @for row in &overview.queues { (queue_row(base, row, now)) }
            }
        }
    };
    super::page(base, "Queues", who, body)
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

fn queue_row(base: &Base, row: &QueueRow, now: u64) -> Markup {
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
                a href=(link) { (Clip(&row.name, LISTED_CHARS)) }
                @if row.paused { " " span.chip.bad { "paused" } }
                @if row.grouped { " " a.chip href=(base.groups(&row.name)) { "grouped" } }
            }
            @for state in LISTED_STATES {
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
            td.n { a href={ (base.workers()) "?queue=" (url_segment(&row.name)) } { (row.workers) } }
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
