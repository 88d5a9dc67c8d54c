//! Who works the app's queues: the processes of the roster (host, pid, program, the
//! queues each serves with its concurrency and the jobs it runs now, started at, last
//! seen), then every worker connection (the queue, the worker's name, where it
//! connects from, since when).

use axum::response::Html;
use maud::html;

use super::format::{self, Clip};
use crate::base::Base;
use crate::limits::LISTED_CHARS;
use crate::load::workers::WorkersPage;

/// The workers page, for `who`.
pub(crate) fn page(base: &Base, who: &str, read: &WorkersPage) -> Html<String> {
    let now = format::now_ms();
    let (queues, processes, rows) = (&read.queues, &read.processes, &read.connections);
    let body = html! {
        h1 { "Workers" @if let [one] = queues.as_slice() { " of " a href=(base.queue(one)) { (Clip(one, 80)) } } }
        h2 { "Processes" }
        @if processes.is_empty() {
            p.muted { "No process records itself (the app's process_roster is off, or no worker runs)." }
        } @else {
            table {
                thead { tr { th { "host" } th.n { "pid" } th { "program" } th { "queues (busy / concurrency)" } th { "started" } th { "last seen" } } }
                tbody {
                    @for p in processes {
                        tr {
                            td { (Clip(&p.host, LISTED_CHARS)) }
                            td.n { (p.pid) }
                            td { (Clip(&p.name, LISTED_CHARS)) }
                            td {
                                @for (i, w) in p.workers.iter().filter(|w| queues.contains(&w.queue)).enumerate() {
                                    @if i > 0 { ", " }
                                    a href=(base.queue(&w.queue)) { (Clip(&w.queue, LISTED_CHARS)) }
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
                    @for (queue, w) in rows {
                        tr {
                            td { a href=(base.queue(queue)) { (Clip(queue, LISTED_CHARS)) } }
                            td { (Clip(w.name.as_deref().unwrap_or("(unnamed)"), LISTED_CHARS)) }
                            td { (Clip(&w.addr, LISTED_CHARS)) }
                            td { (format::at(now.saturating_sub(format::millis(&w.age)), now)) }
                            td { (format::ago(now.saturating_sub(format::millis(&w.idle)), now)) }
                        }
                    }
                }
            }
        }
    };
    super::page(base, "workers", who, body)
}
