//! What a request asks for, parsed and checked before anything is read: a queue page's
//! listing, a groups page's cursor, the workers page's queue, an action's name and form
//! body, the clean and add-a-job forms. A bad parameter is a 400 that says what to write
//! instead.

use axum::body::Bytes;
use queue_axum::quote;
use queue_core::{queue::JobFilter, JobState};
use serde::Deserialize;

use crate::limits::{LISTED_STATES, MAX_AFTER_BYTES, MAX_GROUPS_SHOWN, PAGE_SIZE};
use crate::problem::Problem;
use crate::text::{clip, url_segment};

/// The form field that says the operator confirmed.
pub(crate) const CONFIRM: (&str, &str) = ("confirm", "yes");

/// A urlencoded form body, read leniently: an empty body or none is no fields.
pub(crate) struct Fields(Vec<(String, String)>);

impl Fields {
    pub(crate) fn of(body: &Bytes) -> Fields {
        Fields(form_urlencoded::parse(body).into_owned().collect())
    }

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    pub(crate) fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .collect()
    }

    /// Whether the form carries the confirmation.
    pub(crate) fn confirmed(&self) -> bool {
        self.get(CONFIRM.0) == Some(CONFIRM.1)
    }
}

/// An action on one job (`/{queue}/jobs/{id}/{action}`, or a bulk action on the jobs
/// selected in a list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobAction {
    Retry,
    Promote,
    /// Destructive: confirmed first.
    Remove,
}

impl JobAction {
    /// The action an address or a form names.
    pub(crate) fn parse(action: &str) -> Result<JobAction, Problem> {
        match action {
            "retry" => Ok(JobAction::Retry),
            "promote" => Ok(JobAction::Promote),
            "remove" => Ok(JobAction::Remove),
            other => Err(Problem::unknown_action(other, "retry, promote, remove")),
        }
    }
}

/// An action on a whole queue (`/{queue}/actions/{action}`; `clean` has a form of its
/// own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueAction {
    Pause,
    Resume,
    RetryFailed,
    PromoteDelayed,
    Drain,
    Obliterate,
}

impl QueueAction {
    /// The action an address names.
    pub(crate) fn parse(action: &str) -> Result<QueueAction, Problem> {
        match action {
            "pause" => Ok(QueueAction::Pause),
            "resume" => Ok(QueueAction::Resume),
            "retry-failed" => Ok(QueueAction::RetryFailed),
            "promote-delayed" => Ok(QueueAction::PromoteDelayed),
            "drain" => Ok(QueueAction::Drain),
            "obliterate" => Ok(QueueAction::Obliterate),
            other => Err(Problem::unknown_action(
                other,
                "pause, resume, retry-failed, promote-delayed, drain, clean, obliterate",
            )),
        }
    }

    /// Whether it is confirmed first: it touches many jobs for good.
    pub(crate) fn destructive(self) -> bool {
        matches!(
            self,
            QueueAction::RetryFailed | QueueAction::Drain | QueueAction::Obliterate
        )
    }
}

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
}

impl Listing {
    pub(crate) fn of(query: &QueueQuery) -> Result<Listing, Problem> {
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

    /// The search box's text.
    pub(crate) fn search_text(&self) -> &str {
        self.search.as_ref().map_or("", |(q, _)| q.as_str())
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
        quote(&clip(q, 100))
    )))
}

/// A groups page's query: `after` (the last group of the page before; the first page
/// without it) and `count` (groups a page, [`PAGE_SIZE`] by default).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct GroupsQuery {
    pub(crate) after: Option<String>,
    pub(crate) count: Option<String>,
}

/// Where a groups page starts and how many groups it shows, checked.
#[derive(Debug)]
pub(crate) struct Cursor {
    pub(crate) after: Option<String>,
    pub(crate) count: usize,
}

impl Cursor {
    /// `after` and `count` as a query or a form gives them. `after` is any group id up
    /// to [`MAX_AFTER_BYTES`]; `""` (the group of the jobs without one, which comes
    /// first) is one.
    pub(crate) fn checked(after: Option<&str>, count: Option<&str>) -> Result<Cursor, Problem> {
        if let Some(after) = after.filter(|a| a.len() > MAX_AFTER_BYTES) {
            return Err(Problem::BadRequest(format!(
                "{} is no group id to start after: a page starts after at most \
                 {MAX_AFTER_BYTES} bytes.",
                quote(&clip(after, 100))
            )));
        }
        let count = match count.map(str::parse::<usize>) {
            None => PAGE_SIZE,
            Some(Ok(n)) if (1..=MAX_GROUPS_SHOWN).contains(&n) => n,
            Some(_) => {
                return Err(Problem::BadRequest(format!(
                    "`count` is a whole number from 1 to {MAX_GROUPS_SHOWN}."
                )))
            }
        };
        Ok(Cursor {
            after: after.map(str::to_owned),
            count,
        })
    }

    /// The address of this page of the groups page at `groups`.
    pub(crate) fn link(&self, groups: &str) -> String {
        self.link_after(groups, self.after.as_deref())
    }

    /// The address of the page that starts after `after`, this page's count kept.
    pub(crate) fn link_after(&self, groups: &str, after: Option<&str>) -> String {
        let after = after.map(|a| format!("after={}", url_segment(a)));
        let count = (self.count != PAGE_SIZE).then(|| format!("count={}", self.count));
        let query: Vec<String> = after.into_iter().chain(count).collect();
        if query.is_empty() {
            groups.to_owned()
        } else {
            format!("{groups}?{}", query.join("&"))
        }
    }

    /// The fields an action's form sends: the group, and this page to come back to.
    pub(crate) fn fields(&self, group: &str) -> Vec<(&'static str, String)> {
        let mut fields = vec![("group", group.to_owned())];
        if let Some(after) = &self.after {
            fields.push(("after", after.clone()));
        }
        if self.count != PAGE_SIZE {
            fields.push(("count", self.count.to_string()));
        }
        fields
    }
}

/// The workers page's query: `?queue=`, only that queue's workers.
#[derive(Debug, Deserialize)]
pub(crate) struct WorkersQuery {
    pub(crate) queue: Option<String>,
}

/// The clean form's query.
#[derive(Debug, Deserialize)]
pub(crate) struct CleanQuery {
    pub(crate) state: Option<String>,
    pub(crate) older_than_s: Option<String>,
}

/// What the add-a-job form sends.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct AddForm {
    pub(crate) name: String,
    pub(crate) data: String,
    #[serde(default)]
    pub(crate) job_id: String,
    #[serde(default)]
    pub(crate) delay_ms: String,
}

/// What is wrong with a field of the add-a-job form, shown beside it.
#[derive(Debug, Default)]
pub(crate) struct FieldErrors {
    pub(crate) name: Option<String>,
    pub(crate) data: Option<String>,
    pub(crate) job_id: Option<String>,
    pub(crate) delay_ms: Option<String>,
}

impl FieldErrors {
    /// Whether any field is wrong.
    pub(crate) fn any(&self) -> bool {
        self.name.is_some()
            || self.data.is_some()
            || self.job_id.is_some()
            || self.delay_ms.is_some()
    }
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

    #[test]
    fn a_cursor_is_a_group_id_and_a_bounded_count_and_links_keep_it() {
        let first = Cursor::checked(None, None).unwrap();
        assert_eq!(first.link("/q/groups"), "/q/groups");
        let on = Cursor::checked(Some("a b/&é"), Some("10")).unwrap();
        assert_eq!(
            on.link("/q/groups"),
            "/q/groups?after=a%20b%2F%26%C3%A9&count=10"
        );
        assert_eq!(on.link_after("/q/groups", None), "/q/groups?count=10");
        assert_eq!(
            on.fields("g"),
            [
                ("group", "g".to_owned()),
                ("after", "a b/&é".to_owned()),
                ("count", "10".to_owned())
            ]
        );
        // After the jobs without a group is not the first page.
        let after_none = Cursor::checked(Some(""), None).unwrap();
        assert_eq!(after_none.link("/q/groups"), "/q/groups?after=");
        // A Node producer's group id may be longer than ours, or hold a newline.
        let long = "g".repeat(queue_core::options::MAX_GROUP_BYTES + 1);
        assert!(Cursor::checked(Some(&long), None).is_ok());
        assert!(Cursor::checked(Some("x\ny"), None).is_ok());
        let too_long = "g".repeat(MAX_AFTER_BYTES + 1);
        for (after, count) in [
            (Some(too_long.as_str()), None),
            (None, Some("0")),
            (None, Some("-1")),
            (None, Some("x")),
            (None, Some("")),
            (None, Some("201")),
        ] {
            assert!(
                Cursor::checked(after, count).is_err(),
                "{after:?} {count:?}"
            );
        }
    }
}
