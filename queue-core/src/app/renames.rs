//! Queue names decided at start-up: the code names a queue (`"email"`, or a declared
//! queue type), the app maps it to the name it has in Redis (`email-eu`).

use std::collections::HashMap;

/// The app's renames, from the name in code to the name in Redis.
#[derive(Debug, Clone, Default)]
pub(crate) struct Renames(HashMap<String, String>);

impl Renames {
    pub(crate) fn insert(&mut self, from: String, to: String) {
        self.0.insert(from, to);
    }

    /// The names renamed, as the code gives them.
    pub(crate) fn from(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// The names they have in Redis.
    pub(crate) fn to(&self) -> impl Iterator<Item = &str> {
        self.0.values().map(String::as_str)
    }

    /// The name `queue` has in Redis.
    pub(crate) fn actual<'a>(&'a self, queue: &'a str) -> &'a str {
        self.0.get(queue).map_or(queue, String::as_str)
    }

    /// [`actual`](Self::actual), owned.
    pub(crate) fn owned(&self, queue: &str) -> String {
        self.actual(queue).to_owned()
    }

    /// Each rename's target, checked as a queue name; and no name renamed to itself
    /// through a chain (`a -> b`, `b -> c` is refused: one step each, read as written).
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut renames: Vec<_> = self.0.iter().collect();
        renames.sort();
        for (from, to) in renames {
            if to.is_empty() || to.contains(':') {
                problems.push(format!(
                    "rename_queue(`{from}`, `{to}`): a queue name must be non-empty and without ':'"
                ));
            }
            if self.0.contains_key(to) && to != from {
                problems.push(format!(
                    "rename_queue(`{from}`, `{to}`): `{to}` is itself renamed; rename `{from}` to the final name"
                ));
            }
        }
        problems
    }
}
