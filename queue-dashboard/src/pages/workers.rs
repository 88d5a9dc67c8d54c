//! `/-/workers`: who works the app's queues. The processes of the roster (our workers,
//! with `QueueAppBuilder::process_roster` on): host, pid, program, the queues each
//! serves with its concurrency and the jobs it runs now, started at, last seen. Then
//! every worker connection Redis's `CLIENT LIST` shows (BullMQ names each after its
//! queue; Node's and Python's too): the queue by its name, the worker's name, where it
//! connects from, since when. `?queue=` narrows both to one queue. Redis: two commands
//! and a read per process, then one `CLIENT LIST` per queue.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect};
use axum::Extension;
use maud::html;
use serde::Deserialize;

use crate::view;
use crate::view::format::{self, url_segment, Clip};
use crate::{Access, Base, PageResult, Shared};

/// `?queue=`: only that queue's workers.
#[derive(Debug, Deserialize)]
pub(crate) struct WorkersQuery {
    queue: Option<String>,
}

pub(crate) async fn page(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Query(query): Query<WorkersQuery>,
) -> PageResult {
    let queues = match query.queue.as_deref().filter(|q| !q.is_empty()) {
        Some(name) => {
            shared.queue(name)?;
            vec![name.to_owned()]
        }
        None => shared.app.known_queues(),
    };
    let processes: Vec<_> = shared
        .app
        .get_processes()
        .await?
        .into_iter()
        .filter(|p| p.workers.iter().any(|w| queues.contains(&w.queue)))
        .collect();
    let mut rows = Vec::new();
    for name in &queues {
        let queue = shared.app.queue::<serde_json::Value>(name)?;
        for worker in queue.get_workers().await? {
            rows.push((name.clone(), worker));
        }
    }
    let now = format::now_ms();
    let secs = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let body = html! {
        h1 { "Workers" @if let [one] = queues.as_slice() { " of " a href=(base.queue(one)) { (Clip(one, 80)) } } }
        h2 { "Processes" }
        @if processes.is_empty() {
            p.muted { "No process records itself (the app's process_roster is off, or no worker runs)." }
        } @else {
            table {
                thead { tr { th { "host" } th.n { "pid" } th { "program" } th { "queues (busy / concurrency)" } th { "started" } th { "last seen" } } }
                tbody {
                    @for p in &processes {
                        tr {
                            td { (Clip(&p.host, format::LISTED)) }
                            td.n { (p.pid) }
                            td { (Clip(&p.name, format::LISTED)) }
                            td {
                                @for (i, w) in p.workers.iter().filter(|w| queues.contains(&w.queue)).enumerate() {
                                    @if i > 0 { ", " }
                                    a href=(base.queue(&w.queue)) { (Clip(&w.queue, format::LISTED)) }
                                    " " span.chip { (w.busy) " / " (w.concurrency) }
                                }
                            }
                            td { (format::at(p.started_ms, now)) }
                            td { (format::ago(p.last_seen_ms, now)) }
                        }
                    }
                }
            }
        }
        h2 { "Connections" }
        @if rows.is_empty() {
            p.muted { "No worker is connected (or this Redis does not list its clients)." }
        } @else {
            table {
                thead { tr { th { "queue" } th { "worker" } th { "from" } th { "connected since" } th { "last seen" } } }
                tbody {
                    @for (queue, w) in &rows {
                        tr {
                            td { a href=(base.queue(queue)) { (Clip(queue, format::LISTED)) } }
                            td { (Clip(w.name.as_deref().unwrap_or("(unnamed)"), format::LISTED)) }
                            td { (Clip(&w.addr, format::LISTED)) }
                            td { (format::at(now.saturating_sub(secs(w.age)), now)) }
                            td { (format::ago(now.saturating_sub(secs(w.idle)), now)) }
                        }
                    }
                }
            }
        }
    };
    Ok(view::page(&base, "workers", access.who(), body).into_response())
}

/// `/{queue}/workers`: the workers page narrowed to the queue.
pub(crate) async fn of_queue(base: Base, Path(name): Path<String>) -> PageResult {
    Ok(Redirect::to(&format!("{}?queue={}", base.workers(), url_segment(&name))).into_response())
}
