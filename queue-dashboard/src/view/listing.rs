//! A queue page's table of jobs, and the line that says where the page is: its number,
//! or how far a search got. A sealed failure reason reads as sealed, with its key's id
//! when Redis's cut left it: a listing opens none, for any reader (the job's page does,
//! for a reader the policy lets reveal it, and audits it).

use maud::{html, Markup};
use queue_core::queue::JobSummary;

use super::format::{self, ago, duration, Clip};
use super::sealed;
use crate::base::Base;
use crate::limits::{CLIP_BYTES, LISTED_CHARS, PAGE_SIZE};
use crate::load::listing::Found;
use crate::load::notes::sealed_in_listing;
use crate::query::Listing;

/// The table of rows (with bulk checkboxes for an operator), and the line that says
/// where this page is: its number, or how far the search got.
pub(crate) fn render(
    listing: &Listing,
    found: &Found,
    here: &str,
    base: &Base,
    queue: &str,
    total: u64,
    bulk: bool,
) -> Markup {
    let now = format::now_ms();
    let rows = found.rows();
    let (back, forward) = if listing.oldest_first {
        ("older", "newer")
    } else {
        ("newer", "older")
    };
    html! {
        @if rows.is_empty() {
            p.muted { "No jobs here." }
        } @else {
            table.jobs {
                thead {
                    tr {
                        @if bulk { th { span.muted { "select" } } }
                        th { "id" } th { "name" } th { "added" } th { "took" }
                        th.n { "attempts" } th { "reason" }
                    }
                }
                tbody {
                    @for row in rows { (job_row(row, base, queue, now, bulk)) }
                }
            }
        }
        p.muted {
            @match found {
                Found::Page(_, more) => {
                    "page " (listing.page) " of " (usize::try_from(total).unwrap_or(usize::MAX).div_ceil(PAGE_SIZE).max(1))
                    @if listing.page > 1 { " · " a href=(listing.link(here, listing.page - 1, None)) { (back) } }
                    @if *more { " · " a href=(listing.link(here, listing.page + 1, None)) { (forward) } }
                },
                Found::Search(scan, _) => {
                    (scan.matches.len()) " matches among jobs " (listing.from + 1) "–" (listing.from + scan.scanned)
                    " of " (total) " " (listing.state.as_str())
                    @if scan.skipped_large > 0 {
                        " (" (scan.skipped_large) " payloads too large to search were skipped)"
                    }
                    @if let Some(next) = scan.next {
                        " · " a href=(listing.link(here, 1, Some(next))) { "search on from job " (next + 1) }
                    } @else {
                        " · the whole state was searched"
                    }
                },
            }
        }
        @if let (true, Found::Search(_, envelopes)) = (listing.searches_payloads(), found) {
            p.muted.sealed-note {
                "Sealed jobs are not searched: a search never opens a sealed payload, so \
                 a sealed job matches no payload field."
                @if *envelopes > 0 {
                    " " (envelopes) " sealed " (if *envelopes == 1 { "job" } else { "jobs" })
                    " matched by the envelope alone, and left out."
                }
            }
        }
    }
}

fn job_row(row: &JobSummary, base: &Base, queue: &str, now: u64, bulk: bool) -> Markup {
    let took = row
        .finished_on_ms
        .zip(row.processed_on_ms)
        .map(|(end, start)| duration(end.saturating_sub(start)));
    html! {
        tr data-job=(row.id) {
            @if bulk {
                td { @if !row.id_clipped { input type="checkbox" name="id" value=(row.id) form="bulk" aria-label="select"; } }
            }
            td {
                @if row.id_clipped {
                    (Clip(&row.id, LISTED_CHARS))
                } @else {
                    a href=(base.job(queue, &row.id)) { (Clip(&row.id, LISTED_CHARS)) }
                }
                " " span.muted data-live-state {}
            }
            td { (Clip(&row.name, LISTED_CHARS)) }
            td { (ago(row.timestamp_ms, now)) }
            td { @if let Some(took) = took { (took) } }
            td.n { (row.attempts_made) "/" (row.max_attempts) }
            td.bad { (reason(row.failed_reason.as_deref().unwrap_or_default())) }
        }
    }
}

/// A row's failure reason, as Redis cut it: sealed (whole, or cut from a sealed one) as
/// the chip and its key's id; as stored otherwise.
fn reason(text: &str) -> Markup {
    match sealed_in_listing(text, CLIP_BYTES) {
        Some(key) => sealed::listed(key.as_deref()),
        None => html! { (Clip(text, LISTED_CHARS)) },
    }
}
