//! `/{queue}/schedulers`: the queue's job schedulers, soonest first, with run-now and
//! remove for an operator. Redis: one read of at most 1,000 schedulers.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::Extension;
use maud::html;

use super::sub_page_heading;
use crate::view::format::{self, url_segment, Clip};
use crate::view::{self, widgets};
use crate::{Access, Base, PageResult, Shared};

/// Schedulers listed.
const SHOWN: usize = 1_000;

pub(crate) async fn page(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let here = base.queue(&name);
    let schedulers = queue.get_schedulers(0..SHOWN).await?;
    let now = format::now_ms();
    let body = html! {
        (sub_page_heading(&here, &name, "schedulers"))
        @if schedulers.is_empty() {
            p.muted { "No schedulers." }
        } @else {
            table {
                thead { tr { th { "id" } th { "job" } th { "when" } th { "time zone" } th { "next run" } th.n { "runs" } th {} } }
                tbody {
                    @for s in &schedulers {
                        tr {
                            td { (Clip(&s.id, format::LISTED)) }
                            td { (Clip(&s.job_name, format::LISTED)) }
                            td {
                                @match (&s.pattern, s.every) {
                                    (Some(pattern), _) => { "cron " code { (Clip(pattern, format::LISTED)) } },
                                    (None, Some(every)) => { "every " (format::duration(u64::try_from(every.as_millis()).unwrap_or(u64::MAX))) },
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
    Ok(view::page(&base, &format!("{name} schedulers"), access.who(), body).into_response())
}
