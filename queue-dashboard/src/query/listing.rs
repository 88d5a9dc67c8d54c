//! A queue page's query, checked: the state it lists, the page or where a search goes
//! on, the order, and the search itself (an id prefix, a name, or, where the
//! application turned it on, a payload field).

use queue_axum::quote;
use queue_core::{queue::JobFilter, JobState};
use serde::Deserialize;

use crate::limits::LISTED_STATES;
use crate::problem::Problem;
use crate::text::{clip, url_segment};

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
    pub(crate) page: usize,
    pub(crate) oldest_first: bool,
    pub(crate) search: Option<(String, JobFilter)>,
    pub(crate) from: usize,
    /// Whether a search may look into payloads (the dashboard's `payload_search`): the
    /// search box offers it only then.
    pub(crate) payload_search: bool,
}

impl Listing {
    /// `query` checked; a payload field's search only if `payload_search`.
    pub(crate) fn of(query: &QueueQuery, payload_search: bool) -> Result<Listing, Problem> {
        let state = match query.state.as_deref() {
            None | Some("") => JobState::Waiting,
            Some(s) => match s.parse::<JobState>() {
                Ok(state) if LISTED_STATES.contains(&state) => state,
                _ => {
                    return Err(Problem::BadRequest(format!(
                        "{} is not a state a queue lists; use one of: waiting, prioritized, \
                         delayed, active, waiting-children, completed, failed.",
                        quote(&clip(s, 100))
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
                    quote(&clip(other, 100))
                )))
            }
        };
        let name = query
            .name
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty());
        let search = match (query.q.as_deref().map(str::trim), name) {
            (Some(q), _) if !q.is_empty() => Some((q.to_owned(), parse_search(q, payload_search)?)),
            (_, Some(name)) => Some((format!("name = {name}"), JobFilter::Name(name.to_owned()))),
            _ => None,
        };
        Ok(Listing {
            state,
            page,
            oldest_first,
            search,
            from,
            payload_search,
        })
    }

    /// This listing's address with `page` or `from` changed.
    pub(crate) fn link(&self, here: &str, page: usize, from: Option<usize>) -> String {
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

    /// Whether the search looks into payloads (`data.user_id = 42`): it does not into
    /// sealed ones, and its page says so.
    pub(crate) fn searches_payloads(&self) -> bool {
        matches!(self.search, Some((_, JobFilter::DataField { .. })))
    }

    /// The search box's text.
    pub(crate) fn search_text(&self) -> &str {
        self.search.as_ref().map_or("", |(q, _)| q.as_str())
    }
}

/// A search: `name = welcome`, `data.user_id = 42` (the value as JSON, or as text when
/// it is not JSON) if `payload_search`, else an id prefix.
fn parse_search(q: &str, payload_search: bool) -> Result<JobFilter, Problem> {
    let Some((field, value)) = q.split_once('=') else {
        return Ok(JobFilter::IdPrefix(q.to_owned()));
    };
    let (field, value) = (field.trim(), value.trim());
    if field == "name" {
        return Ok(JobFilter::Name(value.to_owned()));
    }
    if field.starts_with("data.") && !payload_search {
        // Said as such, not as a bad search: the operator typed what the dashboard
        // could do, and the application chose not to (it is the costliest read).
        return Err(Problem::BadRequest(
            "Searching payload fields (`data.…`) is off on this dashboard, or for you: such \
             a search decodes every payload it looks through inside Redis. The application \
             turns it on with `Dashboard::payload_search(true)`, for those its policy shows \
             payloads. An id prefix and `name = welcome` work as they are."
                .to_owned(),
        ));
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
    let payload = if payload_search {
        ", `name = welcome` or `data.user_id = 42`"
    } else {
        " or `name = welcome`"
    };
    Err(Problem::BadRequest(format!(
        "{} is not a search; use an id prefix{payload}.",
        quote(&clip(q, 100))
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_read_as_an_id_prefix_a_name_or_a_payload_field() {
        let on = |q| parse_search(q, true);
        assert!(matches!(on("welcome-4"), Ok(JobFilter::IdPrefix(p)) if p == "welcome-4"));
        assert!(matches!(on("name = welcome"), Ok(JobFilter::Name(n)) if n == "welcome"));
        assert!(matches!(
            on("data.user.id = 42"),
            Ok(JobFilter::DataField { path, value }) if path == "user.id" && value == 42
        ));
        assert!(matches!(
            on("data.email=ada@example.com"),
            Ok(JobFilter::DataField { value, .. }) if value == "ada@example.com"
        ));
        assert!(on("data. = 1").is_err());
        assert!(on("priority = 1").is_err());
    }

    #[test]
    fn a_payload_field_search_is_refused_unless_turned_on_and_the_others_work() {
        let off = |q| parse_search(q, false);
        assert!(matches!(off("welcome-4"), Ok(JobFilter::IdPrefix(_))));
        assert!(matches!(off("name = welcome"), Ok(JobFilter::Name(_))));
        for q in ["data.user.id = 42", "data. = 1"] {
            match off(q) {
                Err(Problem::BadRequest(why)) => {
                    assert!(why.contains("payload_search(true)"), "{why}")
                }
                other => panic!("{q}: {other:?}"),
            }
        }
        match off("priority = 1") {
            Err(Problem::BadRequest(why)) => assert!(!why.contains("data."), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
