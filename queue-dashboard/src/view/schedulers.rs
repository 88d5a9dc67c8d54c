//! A queue's job schedulers, soonest first, with run-now and remove for an operator.

use axum::response::Html;
use maud::html;
use queue_axum::access::Access;
use queue_core::queue::SchedulerInfo;

use super::format::{self, Clip};
use super::widgets::{self, sub_page_heading};
use crate::base::Base;
use crate::limits::LISTED_CHARS;
use crate::text::url_segment;

/// Queue `name`'s schedulers page.
pub(crate) fn page(
    base: &Base,
    access: &Access,
    name: &str,
    schedulers: &[SchedulerInfo],
) -> Html<String> {
    let here = base.queue(name);
    let now = format::now_ms();
    let body = html! {
        (sub_page_heading(&here, name, "schedulers"))
        @if schedulers.is_empty() {
            p.muted { "No schedulers." }
        } @else {
            table {
                thead { tr { th { "id" } th { "job" } th { "when" } th { "time zone" } th { "next run" } th.n { "runs" } th {} } }
                tbody {
                    @for s in schedulers {
                        tr {
                            td { (Clip(&s.id, LISTED_CHARS)) }
                            td { (Clip(&s.job_name, LISTED_CHARS)) }
                            td {
                                @match (&s.pattern, s.every) {
                                    (Some(pattern), _) => { "cron " code { (Clip(pattern, LISTED_CHARS)) } },
                                    (None, Some(every)) => { "every " (format::duration(format::millis(&every))) },
                                    (None, None) => "—",
                                }
                            }
                            td { (Clip(s.tz.as_deref().unwrap_or("UTC"), 60)) }
                            td {
                                @match s.next_run_ms {
                                    Some(at) => (format::ago(at, now)),
                                    None => "—",
                                }
                            }
                            td.n { (s.iterations) }
                            td {
                                @if access.can_act() {
                                    @let action = |a: &str| format!("{here}/schedulers/{}/{a}", url_segment(&s.id));
                                    (widgets::post_button(&action("run"), "Run now", false))
                                    " "
                                    (widgets::post_button(&action("remove"), "Remove", true))
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    super::page(base, &format!("{name} schedulers"), access.who(), body)
}
