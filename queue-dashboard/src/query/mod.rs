//! What a request asks for, parsed and checked before anything is read: a queue page's
//! listing and search (in `listing`), a groups page's cursor, the workers page's queue,
//! an action's name and form body, the clean and add-a-job forms. A bad parameter is a
//! 400 that says what to write instead.

mod listing;

use axum::body::Bytes;
use queue_axum::quote;
use serde::Deserialize;

use crate::limits::{MAX_AFTER_BYTES, MAX_GROUPS_SHOWN, PAGE_SIZE};
use crate::problem::Problem;
use crate::text::{clip, url_segment};

pub(crate) use listing::{Listing, QueueQuery};

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
