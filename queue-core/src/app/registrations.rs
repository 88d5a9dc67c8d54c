//! Which attribute-macro registrations of the binary an app uses.

use crate::contract::QueueType;
use crate::registry::Registered;

/// Which `#[processor]`, `#[inject_queue]` and event-listener registrations linked into
/// this binary an app uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Registrations {
    /// All of them (the default).
    #[default]
    All,
    /// None: only what is given to the builder explicitly (still checked against the
    /// `#[job_queue]` declarations linked into the binary).
    None,
    /// Those of these queues only (several apps in one binary, e.g. tests).
    Queues(Vec<String>),
}

impl Registrations {
    /// Those of the declared queue `Q` only: [`Registrations::Queues`] with its name.
    pub fn of<Q: QueueType>() -> Self {
        Registrations::Queues(vec![Q::NAME.to_owned()])
    }

    /// The queues it names, when it names some.
    pub(super) fn named(&self) -> &[String] {
        match self {
            Registrations::Queues(queues) => queues,
            Registrations::All | Registrations::None => &[],
        }
    }

    pub(super) fn collect(&self) -> Registered {
        match self {
            Registrations::All => Registered::collect(|_| true),
            // Declarations are contracts, not behaviour: a handler given explicitly is
            // still checked against them.
            Registrations::None => Registered::declarations_only(),
            Registrations::Queues(queues) => Registered::collect(|q| queues.iter().any(|k| k == q)),
        }
    }
}
