//! The operator's actions, each beside its confirmation. An action is a POST the guard
//! has let through (an operator, from the dashboard's own origin), is logged on the
//! audit target, and answers with a redirect to the page it came from, or with a page
//! that says why it could not be done. A destructive one (drain, clean, remove,
//! obliterate, retry all) is confirmed first: a link leads to its confirmation (a `GET`
//! of the action's own address, which says what it will do and how many jobs it
//! touches), and a POST without `confirm=yes` answers that page instead.

pub(crate) mod add_job;
pub(crate) mod bulk;
pub(crate) mod clean;
pub(crate) mod group;
pub(crate) mod job;
pub(crate) mod queue;
pub(crate) mod scheduler;
