//! What a queue page lists: one state's jobs, a page at a time, or the matches of a
//! bounded search; read as rows whose strings Redis cuts (one script either way).

use maud::{html, Markup};
use queue_core::{
    queue::JobFilter, queue::JobScan, queue::JobSummary, queue::ScanLimits, JobState, Queue,
};
use serde::Deserialize;

use super::LISTED;
use crate::view::format::{self, ago, duration, url_segment, Clip};
use crate::{Base, Problem, PAGE_SIZE};
use queue_axum::quote;

/// How many jobs a search looks at per page: ids alone for an id prefix, a field of
/// each job for a name or a payload field.
pub(crate) const SCAN_IDS: usize = 20_000;
/// See [`SCAN_IDS`].
pub(crate) const SCAN_JOBS: usize = 5_000;

/// Bytes of each listed string Redis sends (a character is at most four).
const CLIP_BYTES: usize = format::LISTED * 4;

/// A queue page's query: `state`, `page` (from 1), `order` (`newest` or `oldest`), `q`
/// (a search: an id prefix, `name = welcome`, `data.user_id = 42`), `name` (the same as
/// `q=name = ..`), `from` (where a search goes on), and `id` to look a job up.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct QueueQuery {
    state: Option<String>,
    page: Option<String>,
    order: Option<String>,
    name: Option<String>,
    q: Option<String>,
    from: Option<String>,
    pub(crate) id: Option<String>,
}

/// What a queue page lists, checked.
pub(crate) struct Listing {
    pub(crate) state: JobState,
    page: usize,
    oldest_first: bool,
    search: Option<(String, JobFilter)>,
    from: usize,
}

/// What was read for a listing.
pub(crate) enum Found {
    /// A page of the state's jobs, and whether more follow.
    Page(Vec<JobSummary>, bool),
    /// A search's matches and how far it got.
    Search(JobScan),
}

impl Listing {
    pub(crate) fn of(query: &QueueQuery) -> Result<Listing, Problem> {
        let state = match query.state.as_deref() {
            None | Some("") => JobState::Waiting,
            Some(s) => match s.parse::<JobState>() {
                Ok(state) if LISTED.contains(&state) => state,
                _ => {
                    return Err(Problem::BadRequest(format!(
                        "{} is not a state a queue lists; use one of: waiting, prioritized, \
                         delayed, active, waiting-children, completed, failed.",
                        quote(&format::clip(s, 100))
                    )))
                }
            },
        };
        let number = |value: Option<&str>, what: &str, min: usize| match value.map(str::parse) {
            None => Ok(min),
            Some(Ok(n)) if (min..=100_000_000).contains(&n) => Ok(n),
            Some(_) => Err(Problem::BadRequest(format!(
                "`{what}` is a whole number from {min}."
            ))),
        };
        let page = number(query.page.as_deref(), "page", 1)?;
        let from = number(query.from.as_deref(), "from", 0)?;
        let oldest_first = match query.order.as_deref() {
            None | Some("newest" | "") => false,
            Some("oldest") => true,
            Some(other) => {
                return Err(Problem::BadRequest(format!(
                    "{} is not an order; use newest or oldest.",
                    quote(&format::clip(other, 100))
                )))
            }
        };
        let name = query
            .name
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty());
        let search = match (query.q.as_deref().map(str::trim), name) {
            (Some(q), _) if !q.is_empty() => Some((q.to_owned(), parse_search(q)?)),
            (_, Some(name)) => Some((format!("name = {name}"), JobFilter::Name(name.to_owned()))),
            _ => None,
        };
        Ok(Listing {
            state,
            page,
            oldest_first,
            search,
            from,
        })
    }

    /// Reads the listing: one script.
    pub(crate) async fn fetch(
        &self,
        queue: &Queue<serde_json::Value>,
    ) -> Result<Found, queue_core::Error> {
        let Some((_, filter)) = &self.search else {
            let skip = (self.page - 1) * PAGE_SIZE;
            let mut rows = queue
                .get_job_summaries(
                    self.state,
                    skip..skip + PAGE_SIZE + 1,
                    self.oldest_first,
                    CLIP_BYTES,
                )
                .await?;
            let more = rows.len() > PAGE_SIZE;
            rows.truncate(PAGE_SIZE);
            return Ok(Found::Page(rows, more));
        };
        let mut limits = ScanLimits::default();
        limits.from = self.from;
        limits.jobs = match filter {
            JobFilter::IdPrefix(_) => SCAN_IDS,
            _ => SCAN_JOBS,
        };
        limits.matches = PAGE_SIZE;
        limits.oldest_first = self.oldest_first;
        limits.clip = CLIP_BYTES;
        Ok(Found::Search(
            queue.scan_jobs(self.state, filter, &limits).await?,
        ))
    }

    /// This listing's address with `page` or `from` changed.
    fn link(&self, here: &str, page: usize, from: Option<usize>) -> String {
        let mut link = format!("{here}?state={}", self.state.as_str());
        if self.oldest_first {
            link.push_str("&order=oldest");
        }
        match (&self.search, from) {
            (Some((q, _)), Some(from)) => {
                link.push_str(&format!("&q={}&from={from}", url_segment(q)));
            }
            _ => link.push_str(&format!("&page={page}")),
        }
        link
    }

    /// The search box's text.
    pub(crate) fn search_text(&self) -> &str {
        self.search.as_ref().map_or("", |(q, _)| q.as_str())
    }

    pub(crate) fn oldest_first(&self) -> bool {
        self.oldest_first
    }

    /// The table of rows (with bulk checkboxes for an operator), and the line that says
    /// where this page is: its number, or how far the search got.
    pub(crate) fn render(
        &self,
        found: &Found,
        here: &str,
        base: &Base,
        queue: &str,
        total: u64,
        bulk: bool,
    ) -> Markup {
        let now = format::now_ms();
        let rows = match found {
            Found::Page(rows, _) => rows,
            Found::Search(scan) => &scan.matches,
        };
        let (back, forward) = if self.oldest_first {
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
                        "page " (self.page) " of " (usize::try_from(total).unwrap_or(usize::MAX).div_ceil(PAGE_SIZE).max(1))
                        @if self.page > 1 { " · " a href=(self.link(here, self.page - 1, None)) { (back) } }
                        @if *more { " · " a href=(self.link(here, self.page + 1, None)) { (forward) } }
                    },
                    Found::Search(scan) => {
                        (scan.matches.len()) " matches among jobs " (self.from + 1) "–" (self.from + scan.scanned)
                        " of " (total) " " (self.state.as_str())
                        @if scan.skipped_large > 0 {
                            " (" (scan.skipped_large) " payloads too large to search were skipped)"
                        }
                        @if let Some(next) = scan.next {
                            " · " a href=(self.link(here, 1, Some(next))) { "search on from job " (next + 1) }
                        } @else {
                            " · the whole state was searched"
                        }
                    },
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
                    (Clip(&row.id, format::LISTED))
                } @else {
                    a href=(base.job(queue, &row.id)) { (Clip(&row.id, format::LISTED)) }
                }
                " " span.muted data-live-state {}
            }
            td { (Clip(&row.name, format::LISTED)) }
            td { (ago(row.timestamp_ms, now)) }
            td { @if let Some(took) = took { (took) } }
            td.n { (row.attempts_made) "/" (row.max_attempts) }
            td.bad { (Clip(row.failed_reason.as_deref().unwrap_or_default(), format::LISTED)) }
        }
    }
}

/// A search: `name = welcome`, `data.user_id = 42` (the value as JSON, or as text when
/// it is not JSON), else an id prefix.
fn parse_search(q: &str) -> Result<JobFilter, Problem> {
    let Some((field, value)) = q.split_once('=') else {
        return Ok(JobFilter::IdPrefix(q.to_owned()));
    };
    let (field, value) = (field.trim(), value.trim());
    if field == "name" {
        return Ok(JobFilter::Name(value.to_owned()));
    }
    if let Some(path) = field
        .strip_prefix("data.")
        .filter(|p| !p.is_empty() && p.split('.').all(|part| !part.is_empty()))
    {
        let value = serde_json::from_str(value)
            .unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
        return Ok(JobFilter::DataField {
            path: path.to_owned(),
            value,
        });
    }
    Err(Problem::BadRequest(format!(
        "{} is not a search; use an id prefix, `name = welcome` or `data.user_id = 42`.",
        quote(&format::clip(q, 100))
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_read_as_an_id_prefix_a_name_or_a_payload_field() {
        assert!(
            matches!(parse_search("welcome-4"), Ok(JobFilter::IdPrefix(p)) if p == "welcome-4")
        );
        assert!(matches!(parse_search("name = welcome"), Ok(JobFilter::Name(n)) if n == "welcome"));
        assert!(matches!(
            parse_search("data.user.id = 42"),
            Ok(JobFilter::DataField { path, value }) if path == "user.id" && value == 42
        ));
        assert!(matches!(
            parse_search("data.email=ada@example.com"),
            Ok(JobFilter::DataField { value, .. }) if value == "ada@example.com"
        ));
        assert!(parse_search("data. = 1").is_err());
        assert!(parse_search("priority = 1").is_err());
    }
}
